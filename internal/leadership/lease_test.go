package leadership

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// memoryLock is a resource lock held in memory; fail makes its writes fail.
type memoryLock struct {
	record resourcelock.LeaderElectionRecord
	fail   error
}

func (m *memoryLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r := m.record
	return &r, nil, nil
}
func (m *memoryLock) Create(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	return m.Update(context.Background(), ler)
}
func (m *memoryLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	if m.fail != nil {
		return m.fail
	}
	m.record = ler
	return nil
}
func (m *memoryLock) RecordEvent(string) {}
func (m *memoryLock) Identity() string   { return "me" }
func (m *memoryLock) Describe() string   { return "memory" }

func TestLeaseHeld(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	renew := func(l *Lease, holder string) error {
		return l.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: holder})
	}
	cases := []struct {
		name string
		act  func(l *Lease, lock *memoryLock, clock *clocktesting.FakePassiveClock)
		held bool
	}{
		{name: "never acquired", act: func(*Lease, *memoryLock, *clocktesting.FakePassiveClock) {}},
		{name: "just acquired", held: true, act: func(l *Lease, _ *memoryLock, _ *clocktesting.FakePassiveClock) {
			_ = l.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
		}},
		{name: "renewed just within the deadline", held: true, act: func(l *Lease, _ *memoryLock, c *clocktesting.FakePassiveClock) {
			_ = renew(l, "me")
			c.SetTime(start.Add(10*time.Second - time.Millisecond))
		}},
		{name: "frozen past the renew deadline", act: func(l *Lease, _ *memoryLock, c *clocktesting.FakePassiveClock) {
			_ = renew(l, "me")
			c.SetTime(start.Add(30 * time.Second))
		}},
		{name: "renewal failed after a stale hold", act: func(l *Lease, lock *memoryLock, c *clocktesting.FakePassiveClock) {
			_ = renew(l, "me")
			c.SetTime(start.Add(11 * time.Second))
			lock.fail = errors.New("conflict")
			_ = renew(l, "me")
		}},
		{name: "renewed again after a stale hold", held: true, act: func(l *Lease, _ *memoryLock, c *clocktesting.FakePassiveClock) {
			_ = renew(l, "me")
			c.SetTime(start.Add(11 * time.Second))
			_ = renew(l, "me")
		}},
		{name: "released", act: func(l *Lease, _ *memoryLock, _ *clocktesting.FakePassiveClock) {
			_ = renew(l, "me")
			_ = renew(l, "")
		}},
		{name: "another holder written", act: func(l *Lease, _ *memoryLock, _ *clocktesting.FakePassiveClock) {
			_ = renew(l, "me")
			_ = renew(l, "other")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lock := &memoryLock{}
			clock := clocktesting.NewFakePassiveClock(start)
			l := NewLease(lock, 10*time.Second)
			l.clock = clock
			tc.act(l, lock, clock)
			err := l.Held()
			if tc.held && err != nil {
				t.Fatalf("Held() = %v, want nil", err)
			}
			if !tc.held && !errors.Is(err, ErrNotHeld) {
				t.Fatalf("Held() = %v, want ErrNotHeld", err)
			}
		})
	}
}

func TestLeaseTimesRenewalFromSending(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(start)
	lock := &slowLock{memoryLock: memoryLock{}, clock: clock, took: 4 * time.Second}
	l := NewLease(lock, 10*time.Second)
	l.clock = clock
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	// The renewal took 4 s to answer; 7 s later it is 11 s old.
	clock.SetTime(clock.Now().Add(7 * time.Second))
	if err := l.Held(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Held() = %v, want ErrNotHeld: the hold counts from when the renewal was sent", err)
	}
}

// slowLock answers its writes after took has passed on clock.
type slowLock struct {
	memoryLock
	clock *clocktesting.FakePassiveClock
	took  time.Duration
}

func (s *slowLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	s.clock.SetTime(s.clock.Now().Add(s.took))
	return s.memoryLock.Update(ctx, ler)
}

func TestFenceRefusesEveryWriteWithoutTheLease(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "seen"}}
	inner := fake.NewClientBuilder().WithObjects(pod.DeepCopy(), cm.DeepCopy()).WithStatusSubresource(&corev1.Pod{}).Build()
	var held = ErrNotHeld
	c := Fence(inner, func() error { return held })

	writes := map[string]func() error{
		"create": func() error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}})
		},
		"update": func() error {
			o := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(cm), o); err != nil {
				return err
			}
			o.Data = map[string]string{"k": "v"}
			return c.Update(ctx, o)
		},
		"patch": func() error {
			return c.Patch(ctx, cm.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"data":{"p":"v"}}`)))
		},
		"status patch": func() error {
			return c.Status().Patch(ctx, pod.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Failed"}}`)))
		},
		"delete":        func() error { return c.Delete(ctx, cm.DeepCopy()) },
		"delete all of": func() error { return c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace("ns")) },
		"eviction":      func() error { return c.SubResource("eviction").Create(ctx, pod.DeepCopy(), &policyv1.Eviction{}) },
		"subresource patch": func() error {
			return c.SubResource("status").Patch(ctx, pod.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Failed"}}`)))
		},
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, ErrNotHeld) {
			t.Errorf("%s without the lease: %v, want ErrNotHeld", name, err)
		}
	}
	// Nothing reached the store.
	if err := inner.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "new"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create reached the store: %v", err)
	}
	got := &corev1.ConfigMap{}
	if err := inner.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil || len(got.Data) != 0 {
		t.Fatalf("a refused write changed the ConfigMap: %v %v", err, got.Data)
	}
	gotPod := &corev1.Pod{}
	if err := inner.Get(ctx, client.ObjectKeyFromObject(pod), gotPod); err != nil || gotPod.Status.Phase != "" {
		t.Fatalf("a refused status write changed the pod: %v %q", err, gotPod.Status.Phase)
	}

	held = nil
	for _, name := range []string{"create", "update", "patch", "status patch"} {
		if err := writes[name](); err != nil {
			t.Errorf("%s with the lease: %v", name, err)
		}
	}
	if err := inner.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "new"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("a create with the lease did not reach the store: %v", err)
	}
}
