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

// tcpPair is a client connection and the server's end of it, over the
// loopback, both closed when the test ends.
func tcpPair(t *testing.T) (raw, server net.Conn) {
	t.Helper()
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
	raw, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("no connection accepted")
	}
	t.Cleanup(func() { _ = raw.Close(); _ = server.Close() })
	return raw, server
}

// While a paced connection waits out its interval the kernel holds what
// arrives, waking the process only once quietBytes are in; the read
// after it waits for a single byte again, so that an event arriving alone
// after the wait is read at once, not held until more follow.
func TestAWaitingConnectionIsNotWokenByEachPacket(t *testing.T) {
	raw, server := tcpPair(t)
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
	c.sleep = func(time.Duration, <-chan struct{}, <-chan struct{}, <-chan struct{}) {
		if got := lowWater(t, raw); got < quietBytes {
			t.Errorf("while waiting, the socket's low-water mark is %d bytes, want at least %d", got, quietBytes)
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

// Past the low-water mark the kernel reports every packet: a stream that
// brings more than the mark in an interval ends the wait once the mark is
// reached, and is read then, not held until the interval ends with the
// process woken for each packet meanwhile.
func TestAFullSocketEndsTheWait(t *testing.T) {
	raw, server := tcpPair(t)
	c := New(raw, time.Hour)
	defer c.Close()
	if _, err := server.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAtLeast(c, make([]byte, 64), 5); err != nil {
		t.Fatal(err)
	}

	go func() {
		chunk := make([]byte, 1<<10)
		for range 2 * quietBytes / len(chunk) {
			if _, err := server.Write(chunk); err != nil {
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	read := make(chan int, 1)
	go func() {
		n, _ := io.ReadAtLeast(c, make([]byte, bufferSize), bufferSize)
		read <- n
	}()
	select {
	case n := <-read:
		if n < bufferSize {
			t.Fatalf("read %d bytes after the wait, want a buffer's worth", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("twice the quiet bytes arrived and the read still waits out its hour")
	}
}

// A wait cut short (here by Hurry) leaves the read deadline the
// connection's user set: the read after it still ends at that deadline.
func TestTheUsersReadDeadlineOutlivesTheWait(t *testing.T) {
	raw, server := tcpPair(t)
	pacer := NewPacer(time.Hour)
	c := New(raw, time.Hour)
	c.pacer = pacer
	defer c.Close()
	if _, err := server.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAtLeast(c, make([]byte, 64), 5); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if err := c.SetReadDeadline(start.Add(400 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		pacer.Hurry()
	}()
	failed := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 64))
		failed <- err
	}()
	select {
	case err := <-failed:
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("the read ended with %v, want the user's deadline", err)
		}
		if waited := time.Since(start); waited < 350*time.Millisecond {
			t.Fatalf("the read timed out after %v, before the user's deadline of 400ms", waited)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the read outlived the user's deadline of 400ms: the wait cleared it")
	}
}
