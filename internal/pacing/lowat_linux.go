//go:build linux

package pacing

import (
	"syscall"
)

// setLowWater sets the number of bytes the kernel waits for on conn's
// socket before it reports the socket readable (SO_RCVLOWAT). It does
// nothing for a connection without a socket of its own.
func setLowWater(conn any, bytes int) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	// A connection closed meanwhile refuses; the read that follows says so.
	_ = raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, bytes)
	})
}
