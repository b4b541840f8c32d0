package step

// miniBatchMaxKeys bounds the keys a step holds per bundle: the keying
// steps' pre-filter and fold, the in-bundle merge and the stateful step's
// bundle cache each forget what they hold past it.
const miniBatchMaxKeys = 100_000
