package memlimit

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestDecide(t *testing.T) {
	const mib = int64(1) << 20
	files := func(kv ...string) fstest.MapFS {
		fsys := fstest.MapFS{}
		for i := 0; i < len(kv); i += 2 {
			fsys[kv[i]] = &fstest.MapFile{Data: []byte(kv[i+1])}
		}
		return fsys
	}
	cases := []struct {
		name       string
		ratio      float64
		gomemlimit string
		root       fstest.MapFS
		want       int64
		wantErr    string
	}{
		{name: "cgroup v2 limit", ratio: 0.9, root: files("memory.max", "536870912\n"), want: 512 * mib * 9 / 10},
		{name: "cgroup v2 without a limit", ratio: 0.9, root: files("memory.max", "max\n")},
		{name: "cgroup v1 limit", ratio: 0.5, root: files("memory/memory.limit_in_bytes", "1073741824\n"), want: 512 * mib},
		{name: "cgroup v1 without a limit", ratio: 0.9, root: files("memory/memory.limit_in_bytes", "9223372036854771712\n")},
		{name: "v2 read before v1", ratio: 0.5, root: files("memory.max", "1048576000", "memory/memory.limit_in_bytes", "2097152000"), want: 500 * mib},
		{name: "a small container keeps room for what the runtime does not count", ratio: 0.9, root: files("memory.max", "268435456"), want: 208 * mib},
		{name: "a tiny container keeps half its limit for the heap", ratio: 0.9, root: files("memory.max", "67108864"), want: 32 * mib},
		{name: "no cgroup filesystem", ratio: 0.9, root: files()},
		{name: "GOMEMLIMIT wins", ratio: 0.9, gomemlimit: "400MiB", root: files("memory.max", "536870912")},
		{name: "ratio 0 disables", ratio: 0, root: files("memory.max", "536870912")},
		{name: "ratio above 1 refused", ratio: 1.5, root: files("memory.max", "536870912"), wantErr: "above 1"},
		{name: "garbage refused", ratio: 0.9, root: files("memory.max", "lots"), wantErr: "parse memory.max"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decide(tc.ratio, tc.gomemlimit, tc.root)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Limit != tc.want {
				t.Errorf("limit %d, want %d (%s)", got.Limit, tc.want, got.Reason)
			}
			if got.Reason == "" {
				t.Error("no reason given")
			}
		})
	}
}
