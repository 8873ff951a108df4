package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Result is one member's answer, or the error that stood in its way.
type Result[T any] struct {
	Member Member
	Value  T
	Err    error
}

// Options bound a fleet run.
type Options struct {
	// Parallel is how many members are asked at once; below 1 means 1.
	Parallel int
	// Timeout is how long one member may take, 0 for no limit. A member
	// that has not answered by then is an error, whether or not its
	// question heeds the context.
	Timeout time.Duration
}

// Ask puts ask to every member, at most opts.Parallel at a time, and
// returns the results in the members' order. A member with an error of its
// own is not asked. Cancelling ctx ends every question still running.
func Ask[T any](ctx context.Context, members []Member, opts Options, ask func(context.Context, Member) (T, error)) []Result[T] {
	out := make([]Result[T], len(members))
	parallel := max(opts.Parallel, 1)
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, m := range members {
		out[i].Member = m
		if m.Err != nil {
			out[i].Err = m.Err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				out[i].Err = ctx.Err()
				return
			}
			out[i].Value, out[i].Err = askOne(ctx, m, opts.Timeout, ask)
		}()
	}
	wg.Wait()
	return out
}

// askOne asks one member within timeout. A question that ignores its
// context is left behind when the time is up: the fleet's answer never
// waits on one hung cluster.
func askOne[T any](ctx context.Context, m Member, timeout time.Duration, ask func(context.Context, Member) (T, error)) (T, error) {
	if timeout <= 0 {
		return ask(ctx, m)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := ask(ctx, m)
		done <- answer{v, err}
	}()
	select {
	case a := <-done:
		if a.err != nil && ctx.Err() == context.DeadlineExceeded {
			return a.v, fmt.Errorf("no answer within %s: %w", timeout, a.err)
		}
		return a.v, a.err
	case <-ctx.Done():
		var zero T
		if ctx.Err() == context.DeadlineExceeded {
			return zero, fmt.Errorf("no answer within %s", timeout)
		}
		return zero, ctx.Err()
	}
}
