//go:build !linux

package pacing

// setLowWater does nothing where the socket's low-water mark is not set:
// the connection is woken for each packet, as without pacing.
func setLowWater(any, int) {}

// awaitBuffer waits for nothing where the low-water mark is not set: the
// interval ends the wait.
func awaitBuffer(any) *bufferWait { return nil }
