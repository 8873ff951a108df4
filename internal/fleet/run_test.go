package fleet

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestAskKeepsOrderAndBound(t *testing.T) {
	ms := members(t, kubeconfig("a", "b", "c", "d", "e"), []string{"e", "d", "c", "b", "a", "gone"}, false)
	var running, most atomic.Int32
	res := Ask(context.Background(), ms, Options{Parallel: 2}, func(_ context.Context, m Member) (string, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			old := most.Load()
			if n <= old || most.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond) // hold the slot so that others queue
		if m.Name == "gone" {
			t.Error("a member with its own error must not be asked")
		}
		return "answer from " + m.Name, nil
	})
	var got []string
	for _, r := range res {
		if r.Err != nil {
			got = append(got, r.Member.Name+"!")
			continue
		}
		got = append(got, strings.TrimPrefix(r.Value, "answer from "))
	}
	if strings.Join(got, ",") != "e,d,c,b,a,gone!" {
		t.Errorf("results %v", got)
	}
	if most.Load() > 2 {
		t.Errorf("%d members asked at once, bound 2", most.Load())
	}
}

func TestAskTimesOutAHungMember(t *testing.T) {
	ms := members(t, kubeconfig("fast", "hung", "slow-but-polite"), []string{"fast", "hung", "slow-but-polite"}, false)
	release := make(chan struct{})
	defer close(release)
	res := Ask(context.Background(), ms, Options{Parallel: 3, Timeout: 50 * time.Millisecond}, func(ctx context.Context, m Member) (int, error) {
		switch m.Name {
		case "hung":
			<-release // ignores its context, as a stuck dial can
			return 0, nil
		case "slow-but-polite":
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 1, nil
	})
	if res[0].Err != nil || res[0].Value != 1 {
		t.Errorf("fast: %v %v", res[0].Value, res[0].Err)
	}
	for _, r := range res[1:] {
		if r.Err == nil || !strings.Contains(r.Err.Error(), "no answer within 50ms") {
			t.Errorf("%s: want a timeout error, got %v", r.Member.Name, r.Err)
		}
	}
}

func TestAskCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := Ask(ctx, members(t, kubeconfig("a"), []string{"a"}, false), Options{Timeout: time.Second}, func(ctx context.Context, _ Member) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !errors.Is(res[0].Err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", res[0].Err)
	}
}

func TestLevels(t *testing.T) {
	if w := Worst(OK, Blocked, Warn); w != Blocked {
		t.Errorf("worst %v", w)
	}
	if Worst() != OK {
		t.Error("the worst of none is OK")
	}
	for _, tt := range []struct {
		worst, threshold Level
		fails            bool
	}{
		{OK, Warn, false}, {Warn, Warn, true}, {Warn, Blocked, false}, {Blocked, Blocked, true}, {Unknown, Blocked, true},
	} {
		if got := Fails(tt.worst, tt.threshold); got != tt.fails {
			t.Errorf("Fails(%v, %v) = %v", tt.worst, tt.threshold, got)
		}
	}
	if l, err := ParseThreshold("warn"); err != nil || l != Warn {
		t.Errorf("warn: %v %v", l, err)
	}
	if _, err := ParseThreshold("OK"); err == nil {
		t.Error("OK is no threshold")
	}
	if b, _ := Unknown.MarshalText(); string(b) != "Unknown" {
		t.Errorf("%s", b)
	}
}

// members are the named contexts of config, which must all parse.
func members(t *testing.T, config *clientcmdapi.Config, names []string, all bool) []Member {
	t.Helper()
	ms, err := Contexts(config, names, all)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}
