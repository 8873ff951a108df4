//go:build linux

package pacing

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

func lowWater(t *testing.T, conn net.Conn) int {
	t.Helper()
	raw, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var getErr error
	if err := raw.Control(func(fd uintptr) {
		v, getErr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT)
	}); err != nil {
		t.Fatal(err)
	}
	if getErr != nil {
		t.Fatal(getErr)
	}
	return v
}

// While a paced connection waits out its interval the kernel holds what
// arrives, waking the process only once a buffer's worth is in; the read
// after it waits for a single byte again, so that an event arriving alone
// after the wait is read at once, not held until more follow.
func TestAWaitingConnectionIsNotWokenByEachPacket(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- conn
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	if server == nil {
		t.Fatal("no connection accepted")
	}
	defer server.Close()
	c := New(raw, time.Hour)
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}

	// The first read does not wait: nothing was read before it.
	if _, err := server.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := io.ReadAtLeast(c, buf, 5); err != nil || string(buf[:n]) != "first" {
		t.Fatalf("first read: %q, %v", buf[:n], err)
	}

	// The next waits out the interval, during which the socket wakes no
	// one for less than a buffer; the event is sent once the wait is over.
	c.sleep = func(time.Duration, <-chan struct{}, <-chan struct{}) {
		if got := lowWater(t, raw); got < bufferSize {
			t.Errorf("while waiting, the socket's low-water mark is %d bytes, want at least %d", got, bufferSize)
		}
		go func() {
			time.Sleep(20 * time.Millisecond)
			_, _ = server.Write([]byte("alone"))
		}()
	}
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "alone" {
		t.Fatalf("an event arriving alone after the wait: read %q, %v; want it read at once", buf[:n], err)
	}
	if got := lowWater(t, raw); got != 1 {
		t.Errorf("after the wait the socket's low-water mark is %d bytes, want 1", got)
	}
}
