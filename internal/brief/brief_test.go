package brief

import "testing"

func TestFirstFew(t *testing.T) {
	for _, tc := range []struct {
		items []string
		n     int
		want  string
	}{
		{nil, 3, ""},
		{[]string{"a", "b"}, 3, "a, b"},
		{[]string{"a", "b", "c"}, 3, "a, b, c"},
		{[]string{"a", "b", "c", "d", "e"}, 3, "a, b, c and 2 more"},
	} {
		if got := FirstFew(tc.items, tc.n, ", "); got != tc.want {
			t.Errorf("FirstFew(%v, %d) = %q, want %q", tc.items, tc.n, got, tc.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a message too long", 10, "a messa..."},
		// "é" is two bytes: the cut never splits it.
		{"ééééé", 8, "éé..."},
	} {
		if got := Truncate(tc.s, tc.n); got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
