//go:build linux

package pacing

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setLowWater sets the number of bytes the kernel waits for on conn's
// socket before it reports the socket readable (SO_RCVLOWAT). It does
// nothing for a connection without a socket of its own.
func setLowWater(conn any, bytes int) {
	raw, ok := rawConn(conn)
	if !ok {
		return
	}
	// A connection closed meanwhile refuses; the read that follows says so.
	_ = raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, bytes)
	})
}

// awaitBuffer waits for quietBytes in conn's socket, as its low-water
// mark reports it, without reading them; nil for a connection
// without a socket of its own. A stop ends it with a read deadline in the
// past (Conn.stopAwaiting).
func awaitBuffer(conn any) *bufferWait {
	raw, ok := rawConn(conn)
	if !ok {
		return nil
	}
	w := &bufferWait{filled: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(w.ended)
		looks := 0
		// Ended by a stop, a deadline or the connection closing, the
		// wait is over as well: the read that follows says why.
		defer close(w.filled)
		_ = raw.Read(func(fd uintptr) bool {
			// The first look is before any wait, the second may follow a
			// readiness left over from before the mark was set; a third
			// follows the kernel's report of quietBytes in (or of fewer,
			// where it caps the mark lower, or its receive memory runs
			// short), which reading ends either way.
			looks++
			return looks > 2 || queued(fd) >= quietBytes
		})
	}()
	return w
}

// queued is the number of bytes in fd's socket waiting to be read.
func queued(fd uintptr) int {
	n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	if err != nil {
		return 0
	}
	return n
}

func rawConn(conn any) (syscall.RawConn, bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, false
	}
	raw, err := sc.SyscallConn()
	return raw, err == nil
}
