//go:build !linux

package loopback

func restrict(int) (int, error) { return 0, ErrUnsupported }

func listeners() ([]Listener, error) { return nil, ErrUnsupported }
