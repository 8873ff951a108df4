package scheduleragreement

import (
	"encoding/json"
	"net"
	"net/http"
	"sort"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// filterRecorder is a scheduler filter extender that filters nothing: it
// records, per pod, the nodes the scheduler's own filter plugins let through,
// which is the set of allowed nodes the engine must reproduce.
type filterRecorder struct {
	URL    string
	mu     sync.Mutex
	passed map[types.UID][]string
}

// extenderArgs and extenderFilterResult are the scheduler extender protocol
// (k8s.io/kube-scheduler/extender/v1), which has no JSON tags: fields travel
// by their Go names.
type extenderArgs struct {
	Pod       *corev1.Pod
	NodeNames *[]string
}

type extenderFilterResult struct {
	NodeNames *[]string
	Error     string
}

func startFilterRecorder(t *testing.T) *filterRecorder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &filterRecorder{URL: "http://" + l.Addr().String(), passed: map[types.UID][]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/filter", func(w http.ResponseWriter, req *http.Request) {
		var args extenderArgs
		if err := json.NewDecoder(req.Body).Decode(&args); err != nil || args.Pod == nil || args.NodeNames == nil {
			_ = json.NewEncoder(w).Encode(extenderFilterResult{Error: "bad request"})
			return
		}
		names := append([]string(nil), *args.NodeNames...)
		sort.Strings(names)
		r.mu.Lock()
		r.passed[args.Pod.UID] = names
		r.mu.Unlock()
		_ = json.NewEncoder(w).Encode(extenderFilterResult{NodeNames: args.NodeNames})
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *filterRecorder) nodesFor(uid types.UID) ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.passed[uid]
	return n, ok
}
