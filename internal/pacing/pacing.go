// Package pacing reads a network connection in batches. It knows nothing
// of what the bytes are: the feeds wrap their watch connections in it.
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
// While a read waits out its interval, the socket's low-water mark
// (SO_RCVLOWAT, on Linux) keeps the kernel from waking the process for
// each packet that arrives meanwhile: Go's poller would otherwise wake,
// find no reader, and sleep again, once an event. Past the mark the
// kernel reports every packet again, so the mark is set above what a
// heavy stream brings in an interval, and a stream that reaches it all
// the same ends the wait: the read takes what is in.
//
// The price is latency: an event waits up to one interval before it is
// read.
package pacing

import (
	"bufio"
	"context"
	"net"
	"sync"
	"time"
)

// bufferSize is what one read takes in at most: a few dozen pod events.
const bufferSize = 64 << 10

// quietBytes is what a socket holds before the kernel reports it readable
// while a read waits out its interval: more than a heavy stream of pod
// events brings in one (2 MB a second at 100 ms: every pod of a
// 3,000-pod cluster replaced in 35 s), so that each interval ends in one
// wake-up. The kernel raises the socket's receive buffer to hold it.
const quietBytes = 1 << 20

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

	// deadlineMu guards readDeadline, the read deadline the connection's
	// user set: a wait for the socket to fill (awaitBuffer) is ended by a
	// deadline in the past, and the user's is put back after it.
	deadlineMu   sync.Mutex
	readDeadline time.Time

	now   func() time.Time
	sleep func(d time.Duration, closed, woken, filled <-chan struct{})
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
// read, unless the pacer is paused or hurried meanwhile.
func (c *Conn) Read(p []byte) (int, error) {
	if c.r.Buffered() > 0 {
		return c.r.Read(p)
	}
	if !c.full {
		if woken, paced := c.pacer.pacing(); paced {
			if wait := c.every - c.now().Sub(c.last); wait > 0 {
				c.sleepQuietly(wait, woken)
			}
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

// sleepQuietly waits out d while the kernel holds what arrives: the
// socket is reported readable only once quietBytes are in, so that each
// packet no longer wakes the process to find nobody reading; quietBytes
// in end the wait early. Reads wait for a single byte again afterwards,
// or a lone event would wait for more to follow it.
func (c *Conn) sleepQuietly(d time.Duration, woken <-chan struct{}) {
	setLowWater(c.Conn, quietBytes)
	defer setLowWater(c.Conn, 1)
	filled := awaitBuffer(c.Conn)
	defer c.stopAwaiting(filled)
	c.sleep(d, c.closed, woken, filled.done())
}

// stopAwaiting ends a wait for the socket to fill that is still waiting,
// with a read deadline in the past, and puts the user's deadline back once
// it has ended: a read must not begin while it holds the socket.
func (c *Conn) stopAwaiting(w *bufferWait) {
	if w == nil {
		return
	}
	select {
	case <-w.ended:
		return
	default:
	}
	c.deadlineMu.Lock()
	defer c.deadlineMu.Unlock()
	_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
	<-w.ended
	_ = c.Conn.SetReadDeadline(c.readDeadline)
}

// SetReadDeadline sets the connection's read deadline, kept to be put back
// after a wait for the socket to fill.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.deadlineMu.Lock()
	defer c.deadlineMu.Unlock()
	c.readDeadline = t
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets the connection's read and write deadlines, the read
// one kept as SetReadDeadline keeps it.
func (c *Conn) SetDeadline(t time.Time) error {
	c.deadlineMu.Lock()
	defer c.deadlineMu.Unlock()
	c.readDeadline = t
	return c.Conn.SetDeadline(t)
}

// Close closes the connection and ends a read waiting out its interval.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// sleep waits d, or until closed, woken or filled is closed.
func sleep(d time.Duration, closed, woken, filled <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-closed:
	case <-woken:
	case <-filled:
	}
}

// Pacer dials paced connections, for rest.Config's Dial, as client-go
// dials by default. Their pacing stops for as long as it is paused or
// hurried, and a read waiting out its interval is woken then:
//   - Pause and Resume are for lists: a list of every pod must stream as
//     fast as the API server sends it, whatever the reader's pace;
//   - Hurry and Relax are for readers who need events as they come (a
//     migration at work), HurriedFor for those who must know how long
//     events have been read so.
type Pacer struct {
	every  time.Duration
	dialer net.Dialer
	now    func() time.Time

	mu      sync.Mutex
	paused  bool
	hurried time.Time // when Hurry began, zero when relaxed
	// woken is closed, and replaced, when the pacing stops.
	woken chan struct{}
}

// NewPacer returns a pacer of connections read at most once every every.
func NewPacer(every time.Duration) *Pacer {
	return &Pacer{
		every:  every,
		dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		now:    time.Now,
		woken:  make(chan struct{}),
	}
}

// Every is the pacer's interval.
func (p *Pacer) Every() time.Duration { return p.every }

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
// nil pacer's methods do nothing.
func (p *Pacer) Pause() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
	p.wake()
}

// Resume paces the pacer's connections again, unless they are hurried.
func (p *Pacer) Resume() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
}

// Hurry reads the pacer's connections as data arrives, until Relax.
// Hurrying a hurried pacer changes nothing.
func (p *Pacer) Hurry() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hurried.IsZero() {
		p.hurried = p.now()
		p.wake()
	}
}

// Relax paces the pacer's connections again, unless they are paused.
func (p *Pacer) Relax() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hurried = time.Time{}
}

// HurriedFor is how long the pacer has been hurried, zero when it is not.
// Hurried for an interval, its connections hold nothing that arrived
// before: what waited out the interval was read when Hurry woke it.
func (p *Pacer) HurriedFor() time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hurried.IsZero() {
		return 0
	}
	return max(p.now().Sub(p.hurried), time.Nanosecond)
}

// Paused reports whether the pacing is paused for a list.
func (p *Pacer) Paused() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// pacing reports whether reads are paced now, and a channel closed when
// they stop being so. Both are read together: a Hurry or Pause after
// this call closes the channel returned.
func (p *Pacer) pacing() (woken <-chan struct{}, paced bool) {
	if p == nil {
		return nil, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.woken, !p.paused && p.hurried.IsZero()
}

// wake ends the waits of reads pacing; p.mu is held.
func (p *Pacer) wake() {
	close(p.woken)
	p.woken = make(chan struct{})
}

// bufferWait is a wait, on a goroutine of its own, for quietBytes in a
// socket (awaitBuffer): filled is closed when they are in or the wait ends
// otherwise (stopped, a deadline, the connection closed); ended once it no
// longer holds the socket.
type bufferWait struct {
	filled, ended chan struct{}
}

// done is closed once the wait is over; nil, which never is, for no wait.
func (w *bufferWait) done() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.filled
}
