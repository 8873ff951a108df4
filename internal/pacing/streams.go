package pacing

import (
	"bufio"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
)

// Streams wraps a negotiated serializer so that the watch streams it
// frames are read from the response body in reads of up to 64 KiB, not
// one for each event's length and one for its bytes. Over HTTP/2 each
// read of a body gives back flow-control credit, a write to the
// connection once 4 KiB are owed: read one event at a time, that is a
// write for every event or two; read in bulk, one for each batch.
type Streams struct{ runtime.NegotiatedSerializer }

// SupportedMediaTypes wraps the stream framer of every media type.
func (s Streams) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := s.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, len(infos))
	copy(out, infos)
	for i := range out {
		if ss := out[i].StreamSerializer; ss != nil && ss.Framer != nil {
			wrapped := *ss
			wrapped.Framer = bufferedFramer{ss.Framer}
			out[i].StreamSerializer = &wrapped
		}
	}
	return out
}

type bufferedFramer struct{ runtime.Framer }

func (f bufferedFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return f.Framer.NewFrameReader(bufferedBody{Reader: bufio.NewReaderSize(r, bufferSize), Closer: r})
}

func (f bufferedFramer) NewFrameWriter(w io.Writer) io.Writer { return f.Framer.NewFrameWriter(w) }

// bufferedBody reads a body through a buffer and closes the body itself.
type bufferedBody struct {
	*bufio.Reader
	io.Closer
}
