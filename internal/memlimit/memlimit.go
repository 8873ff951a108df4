// Package memlimit sets the Go runtime's soft memory limit from the
// memory limit of the container the manager runs in, so that the garbage
// collector works harder as the heap nears the limit instead of the
// kernel killing the process when it crosses it. It reads cgroup files
// only; it knows nothing of Kubernetes.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// The files that hold a container's memory limit: cgroup v2's, then v1's.
// Paths are relative to the root of the cgroup filesystem's mount
// (/sys/fs/cgroup), which a container sees as its own cgroup.
const (
	cgroupV2Max   = "memory.max"
	cgroupV1Limit = "memory/memory.limit_in_bytes"
)

// unlimitedV1 is the smallest value cgroup v1 reports for "no limit" (the
// largest page-aligned int64, rounded differently by kernel versions).
const unlimitedV1 = int64(1) << 62

// CgroupLimit reads the memory limit of the cgroup at root; 0 means none
// is set.
func CgroupLimit(root fs.FS) (int64, error) {
	for _, name := range []string{cgroupV2Max, cgroupV1Limit} {
		raw, err := fs.ReadFile(root, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", name, err)
		}
		value := strings.TrimSpace(string(raw))
		if value == "max" {
			return 0, nil
		}
		limit, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s (%q): %w", name, value, err)
		}
		if limit >= unlimitedV1 {
			return 0, nil
		}
		return limit, nil
	}
	return 0, nil
}

// Decision is the soft limit chosen and why.
type Decision struct {
	// Limit is the soft limit to set in bytes; 0 leaves the runtime's.
	Limit int64
	// Reason says where it comes from, for the log.
	Reason string
}

// Decide chooses the soft limit: GOMEMLIMIT when the environment sets it
// (the runtime has applied it already), else Soft of the container's
// limit; none when ratio is 0 or no limit is set.
func Decide(ratio float64, gomemlimit string, root fs.FS) (Decision, error) {
	if gomemlimit != "" {
		return Decision{Reason: "GOMEMLIMIT is set in the environment"}, nil
	}
	if ratio <= 0 {
		return Decision{Reason: "disabled by a ratio of 0"}, nil
	}
	if ratio > 1 {
		return Decision{}, fmt.Errorf("memory limit ratio %.2f is above 1: the soft limit would sit above the container's", ratio)
	}
	limit, err := CgroupLimit(root)
	if err != nil {
		return Decision{}, err
	}
	if limit == 0 {
		return Decision{Reason: "the container has no memory limit"}, nil
	}
	soft := Soft(limit, ratio)
	return Decision{
		Limit:  soft,
		Reason: fmt.Sprintf("%.0f%% of the container's memory limit of %d bytes, at most the limit less %d bytes the runtime does not count", ratio*100, limit, outsideSoftLimit),
	}, nil
}

// outsideSoftLimit is what the process holds beyond what the soft limit
// counts: the binary's code and data, which the kernel maps in and charges
// to the container, and what the runtime holds past the limit before its
// scavenger gives it back. bench-scale measured 39 MiB of it at the
// highest, with 150,000 pods in a 256 MiB container.
const outsideSoftLimit = 48 << 20

// Soft is the soft limit for a container of limit bytes: ratio of it, but
// no more than the limit less outsideSoftLimit, so that in a small
// container the whole process stays under the limit, not only its heap;
// and never less than half the limit.
func Soft(limit int64, ratio float64) int64 {
	return min(int64(float64(limit)*ratio), max(limit-outsideSoftLimit, limit/2))
}
