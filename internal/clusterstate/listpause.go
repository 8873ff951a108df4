package clusterstate

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/placement-guard/placement-guard/internal/pacing"
)

// listingPauses pauses the pod feed's pacing while it lists pods: a list,
// or a watch that begins with every pod (the streamed list), must come
// as fast as the API server sends it, never at the pace of a trickle of
// events. The feed's store resumes the pacing once the list is in
// (podStore.Replace).
type listingPauses struct {
	lw    toolscache.ListerWatcherWithContext
	pacer *pacing.Pacer
}

var _ toolscache.ListerWatcherWithContext = listingPauses{}

func (l listingPauses) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	l.pacer.Pause()
	return l.lw.ListWithContext(ctx, o)
}

func (l listingPauses) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		l.pacer.Pause()
	}
	return l.lw.WatchWithContext(ctx, o)
}

// List and Watch are the reflector's older interface; it calls the ones
// with a context.
func (l listingPauses) List(o metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), o)
}

func (l listingPauses) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), o)
}
