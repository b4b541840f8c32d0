package pubsubio

// The options only this package's tests set (named in readOptions and
// writeOptions).

// publishBatch sets how many messages one Publish request carries (500;
// Pub/Sub allows up to 1000 and 10 MB): tests only, to publish a bundle
// in several requests.
func publishBatch(n int) Option {
	return func(c *config) {
		c.Set("publishBatch")
		if n <= 0 || n > 1000 {
			c.Errorf("publishBatch(%d): want 1 to 1000", n)
		}
		c.publishBatch = n
	}
}

// withoutLease turns lease extension off (tests only: it shows the
// redeliveries that leasing prevents).
func withoutLease() Option {
	return func(c *config) {
		c.Set("withoutLease")
		c.disableLease = true
	}
}
