package pacing

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// script is a connection whose reads return the given chunks, one a read,
// as a socket returns what has arrived since the last read.
type script struct {
	net.Conn
	chunks [][]byte
	reads  int
}

func (s *script) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		return 0, io.EOF
	}
	s.reads++
	n := copy(p, s.chunks[0])
	if n < len(s.chunks[0]) {
		s.chunks[0] = s.chunks[0][n:]
	} else {
		s.chunks = s.chunks[1:]
	}
	return n, nil
}

func (s *script) Close() error { return nil }

// fakeTime is a clock that moves when the connection sleeps, or when the
// test says so.
type fakeTime struct {
	t      time.Time
	sleeps []time.Duration
}

func (f *fakeTime) now() time.Time { return f.t }
func (f *fakeTime) sleep(d time.Duration, _, _, _ <-chan struct{}) {
	f.sleeps = append(f.sleeps, d)
	f.t = f.t.Add(d)
}

func paced(s *script, every time.Duration) (*Conn, *fakeTime) {
	clock := &fakeTime{t: time.Unix(1e9, 0)}
	c := New(s, every)
	c.now, c.sleep = clock.now, clock.sleep
	return c, clock
}

func chunk(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// A light stream is read once an interval: the read after a small one
// waits out the rest of the interval, and what one read took in is handed
// out without reading again.
func TestALightStreamIsReadOnceAnInterval(t *testing.T) {
	events := [][]byte{chunk(3000), chunk(5000), chunk(200)}
	s := &script{chunks: append([][]byte(nil), events...)}
	c, clock := paced(s, 100*time.Millisecond)

	var got bytes.Buffer
	p := make([]byte, 1000)
	n, err := c.Read(p)
	if err != nil {
		t.Fatal(err)
	}
	got.Write(p[:n])
	if len(clock.sleeps) != 0 {
		t.Fatalf("the first read waited %v; a new connection's first read must not wait", clock.sleeps)
	}
	// The rest of the first chunk is buffered: no read, no wait.
	for got.Len() < len(events[0]) {
		n, err := c.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		got.Write(p[:n])
	}
	if s.reads != 1 || len(clock.sleeps) != 0 {
		t.Fatalf("handing out one buffered chunk read %d times and waited %v, want 1 read and no wait", s.reads, clock.sleeps)
	}

	// 30 ms pass while the events are decoded; the next read waits 70.
	clock.t = clock.t.Add(30 * time.Millisecond)
	if n, err = c.Read(p); err != nil {
		t.Fatal(err)
	}
	got.Write(p[:n])
	if len(clock.sleeps) != 1 || clock.sleeps[0] != 70*time.Millisecond {
		t.Fatalf("the second read waited %v, want the 70ms left of the interval", clock.sleeps)
	}
	// An interval already past when the reader comes back: no wait.
	for got.Len() < len(events[0])+len(events[1]) {
		n, err := c.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		got.Write(p[:n])
	}
	clock.t = clock.t.Add(250 * time.Millisecond)
	if n, err = c.Read(p); err != nil {
		t.Fatal(err)
	}
	got.Write(p[:n])
	if len(clock.sleeps) != 1 {
		t.Fatalf("a read more than an interval after the last one waited %v", clock.sleeps[1:])
	}
	if !bytes.Equal(got.Bytes(), bytes.Join(events, nil)) {
		t.Fatal("the paced connection changed the stream")
	}
}

// A read that fills the buffer means more is waiting: the next read comes
// at once, so that a list of every pod streams as fast as it is sent.
func TestAHeavyStreamIsReadWithoutWaiting(t *testing.T) {
	var sent [][]byte
	for range 40 {
		sent = append(sent, chunk(bufferSize))
	}
	sent = append(sent, chunk(100))
	s := &script{chunks: append([][]byte(nil), sent...)}
	c, clock := paced(s, time.Second)
	got, err := io.ReadAll(struct{ io.Reader }{c})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Join(sent, nil)) {
		t.Fatal("the paced connection changed the stream")
	}
	// Reads after the 40 full ones: the short tail, then EOF after one wait.
	if len(clock.sleeps) > 1 {
		t.Fatalf("a stream that fills every read waited %d times, want at most once, after its short tail", len(clock.sleeps))
	}
}

// Closing the connection ends a read waiting out its interval at once,
// with net.ErrClosed, as a closed socket's read would.
func TestCloseEndsAWaitingRead(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	c := New(client, time.Hour)
	go func() { _, _ = server.Write([]byte("first")) }()
	if _, err := c.Read(make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 16))
		done <- err
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("a read ended by Close returned %v, want net.ErrClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not end a read waiting out an hour's interval")
	}
}

// A paused pacer's connections read as data arrives: a list streams at
// the API server's speed. Resumed, they wait out their interval again.
func TestAPausedPacerReadsAsDataArrives(t *testing.T) {
	s := &script{chunks: [][]byte{chunk(10), chunk(10), chunk(10), chunk(10)}}
	c, clock := paced(s, time.Second)
	c.pacer = NewPacer(time.Second)
	c.pacer.Pause()
	p := make([]byte, 100)
	for range 3 {
		if _, err := c.Read(p); err != nil {
			t.Fatal(err)
		}
	}
	if len(clock.sleeps) != 0 {
		t.Fatalf("a paused connection waited %v", clock.sleeps)
	}
	c.pacer.Resume()
	if _, err := c.Read(p); err != nil {
		t.Fatal(err)
	}
	if len(clock.sleeps) != 1 {
		t.Fatalf("a resumed connection waited %v, want once", clock.sleeps)
	}
}

// A hurried pacer's connections read as data arrives, for as long as a
// migration at work needs events as they come; relaxed, they wait out
// their interval again. Hurry and Pause are independent: resuming after a
// list leaves a hurried pacer hurried.
func TestAHurriedPacerReadsAsDataArrives(t *testing.T) {
	s := &script{chunks: [][]byte{chunk(10), chunk(10), chunk(10), chunk(10), chunk(10)}}
	c, clock := paced(s, time.Second)
	c.pacer = NewPacer(time.Second)
	c.pacer.Hurry()
	c.pacer.Pause()
	c.pacer.Resume()
	p := make([]byte, 100)
	for range 3 {
		if _, err := c.Read(p); err != nil {
			t.Fatal(err)
		}
	}
	if len(clock.sleeps) != 0 {
		t.Fatalf("a hurried connection waited %v", clock.sleeps)
	}
	c.pacer.Relax()
	if _, err := c.Read(p); err != nil {
		t.Fatal(err)
	}
	if len(clock.sleeps) != 1 {
		t.Fatalf("a relaxed connection waited %v, want once", clock.sleeps)
	}
}

// A read waiting out its interval is woken by Hurry, and by Pause: the
// events that waited in the socket are read at once, not an interval late.
func TestHurryAndPauseWakeAWaitingRead(t *testing.T) {
	for name, stop := range map[string]func(*Pacer){"Hurry": (*Pacer).Hurry, "Pause": (*Pacer).Pause} {
		t.Run(name, func(t *testing.T) {
			client, server := net.Pipe()
			defer server.Close()
			pacer := NewPacer(time.Hour)
			c := New(client, time.Hour)
			c.pacer = pacer
			waiting := make(chan struct{})
			c.sleep = func(d time.Duration, closed, woken, filled <-chan struct{}) {
				close(waiting)
				sleep(d, closed, woken, filled)
			}
			defer c.Close()
			go func() { _, _ = server.Write([]byte("first")) }()
			if _, err := c.Read(make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = server.Write([]byte("second")) }()
			done := make(chan string, 1)
			go func() {
				p := make([]byte, 16)
				n, _ := c.Read(p)
				done <- string(p[:n])
			}()
			<-waiting // the read waits out its hour
			stop(pacer)
			select {
			case got := <-done:
				if got != "second" {
					t.Fatalf("the woken read returned %q, want %q", got, "second")
				}
			case <-time.After(time.Minute):
				t.Fatalf("%s did not wake a read waiting out an hour's interval", name)
			}
		})
	}
}

// HurriedFor tells how long the pacer has been hurried: from the first
// Hurry, not a later one, and zero once relaxed.
func TestHurriedForCountsFromTheFirstHurry(t *testing.T) {
	clock := &fakeTime{t: time.Unix(1e9, 0)}
	p := NewPacer(100 * time.Millisecond)
	p.now = clock.now
	if d := p.HurriedFor(); d != 0 {
		t.Fatalf("a pacer never hurried was hurried for %v", d)
	}
	p.Hurry()
	if d := p.HurriedFor(); d <= 0 || d > time.Millisecond {
		t.Fatalf("a pacer hurried just now was hurried for %v, want a moment", d)
	}
	clock.t = clock.t.Add(60 * time.Millisecond)
	p.Hurry()
	clock.t = clock.t.Add(60 * time.Millisecond)
	if d := p.HurriedFor(); d != 120*time.Millisecond {
		t.Fatalf("hurried for %v, want 120ms since the first Hurry", d)
	}
	p.Relax()
	if d := p.HurriedFor(); d != 0 {
		t.Fatalf("a relaxed pacer was hurried for %v", d)
	}
	var none *Pacer
	none.Hurry()
	none.Relax()
	if none.HurriedFor() != 0 || none.Paused() {
		t.Fatal("a nil pacer must be neither hurried nor paused")
	}
}

// The pacer's connections are paced and carry bytes both ways unchanged.
func TestTheDialerPacesWhatItDials(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.Copy(conn, conn)
	}()
	conn, err := NewPacer(time.Millisecond).Dial(t.Context(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, ok := conn.(*Conn); !ok {
		t.Fatalf("the dialer returned a %T, want a paced *Conn", conn)
	}
	msg := chunk(100_000)
	go func() { _, _ = conn.Write(msg) }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("the echo came back changed")
	}
}

// body is a response body that returns all it has to any read, as an
// HTTP/2 body returns what its stream has received, and counts the reads.
type body struct {
	data   []byte
	reads  int
	closed bool
}

func (b *body) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, io.EOF
	}
	b.reads++
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *body) Close() error { b.closed = true; return nil }

// A watch stream of protobuf events is framed as before, from a body read
// in bulk: forty events in one or two reads, not eighty.
func TestStreamsReadTheBodyInBulk(t *testing.T) {
	info, ok := runtime.SerializerInfoForMediaType(Streams{scheme.Codecs.WithoutConversion()}.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok || info.StreamSerializer == nil {
		t.Fatal("no protobuf stream serializer")
	}
	var wire bytes.Buffer
	w := info.StreamSerializer.NewFrameWriter(&wire)
	var events [][]byte
	for range 40 {
		e := chunk(1500)
		events = append(events, e)
		if _, err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	b := &body{data: wire.Bytes()}
	r := info.StreamSerializer.NewFrameReader(b)
	for i, want := range events {
		got := make([]byte, len(want))
		n, err := r.Read(got)
		if err != nil || n != len(want) || !bytes.Equal(got, want) {
			t.Fatalf("event %d: read %d bytes (%v), want the %d written", i, n, err, len(want))
		}
	}
	if b.reads > 2 {
		t.Fatalf("framing 40 events read the body %d times, want at most 2 (64 KiB each)", b.reads)
	}
	if err := r.Close(); err != nil || !b.closed {
		t.Fatalf("closing the frame reader did not close the body (%v)", err)
	}
}
