// Package pacing reads a network connection in batches.
//
// A watch stream carries many small events. Read as each one arrives, every
// event costs a read system call, a TLS record, the wake-up of the HTTP/2
// read loop, of the watch decoder and of the reflector, and an HTTP/2
// flow-control write back: at a few hundred pod events a second that costs
// several times more CPU than decoding the events. A paced connection
// reads at most once an interval while the stream is light, so that one
// wake-up takes in every event of the interval. A read that fills the
// buffer is followed at once by the next, so a heavy stream (the list of
// every pod) is read as fast as it comes, and a Pacer pauses the pacing
// of its connections for as long as a list streams.
//
// The price is latency: an event waits up to one interval before it is
// read.
package pacing

import (
	"bufio"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// bufferSize is what one read takes in at most: a few dozen pod events.
const bufferSize = 64 << 10

// Conn is a connection whose reads are paced. Its Read is not safe for
// concurrent use, as a TLS or HTTP/2 connection never reads concurrently;
// Write and Close are.
type Conn struct {
	net.Conn
	every time.Duration
	r     *bufio.Reader
	// last is when the connection was last read from; full, whether that
	// read filled the buffer, a sign that more is waiting.
	last time.Time
	full bool
	// pacer, when set, may pause the pacing.
	pacer *Pacer

	closeOnce sync.Once
	closed    chan struct{}

	now   func() time.Time
	sleep func(d time.Duration, cancel <-chan struct{})
}

// New paces conn's reads to at most one every interval, unless the last one
// filled the buffer.
func New(conn net.Conn, every time.Duration) *Conn {
	return &Conn{
		Conn:   conn,
		every:  every,
		r:      bufio.NewReaderSize(conn, bufferSize),
		closed: make(chan struct{}),
		now:    time.Now,
		sleep:  sleep,
	}
}

// Read returns what is buffered, and reads the connection only when
// nothing is, after waiting out the rest of the interval since its last
// read.
func (c *Conn) Read(p []byte) (int, error) {
	if c.r.Buffered() > 0 {
		return c.r.Read(p)
	}
	if !c.full && !c.pacer.Paused() {
		if wait := c.every - c.now().Sub(c.last); wait > 0 {
			c.sleep(wait, c.closed)
		}
	}
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	c.last = c.now()
	n, err := c.r.Read(p)
	c.full = n+c.r.Buffered() >= c.r.Size()
	return n, err
}

// Close closes the connection and ends a read waiting out its interval.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func sleep(d time.Duration, cancel <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-cancel:
	}
}

// Pacer dials paced connections, for rest.Config's Dial, as client-go
// dials by default. Their pacing can be paused: a list of every pod must
// stream as fast as the API server sends it, whatever the reader's pace.
type Pacer struct {
	every  time.Duration
	dialer net.Dialer
	pause  atomic.Bool
}

// NewPacer returns a pacer of connections read at most once every every.
func NewPacer(every time.Duration) *Pacer {
	return &Pacer{every: every, dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
}

// Dial dials a paced connection.
func (p *Pacer) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := p.dialer.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	c := New(conn, p.every)
	c.pacer = p
	return c, nil
}

// Pause reads the pacer's connections as data arrives, until Resume. A
// nil pacer's Pause and Resume do nothing.
func (p *Pacer) Pause() {
	if p != nil {
		p.pause.Store(true)
	}
}

// Resume paces the pacer's connections again.
func (p *Pacer) Resume() {
	if p != nil {
		p.pause.Store(false)
	}
}

// Paused reports whether the pacing is paused.
func (p *Pacer) Paused() bool { return p != nil && p.pause.Load() }
