//go:build race

package hub

// raceDetector says the tests run under the race detector, whose cost
// grows with every byte a test allocates.
const raceDetector = true
