package placement

import "testing"

func TestSpareArraysComeBackAsZeros(t *testing.T) {
	var sp spareArrays[int32]
	a := sp.take(4)
	a[0], a[3] = 7, 9
	sp.give(a[:2]) // a shortened slice is kept whole
	b := sp.take(4)
	if &b[0] != &a[0] {
		t.Fatal("the array given back was not taken again")
	}
	for i, v := range b {
		if v != 0 {
			t.Fatalf("taken again with %d at %d, want zeros", v, i)
		}
	}
	if c := sp.take(4); &c[0] == &b[0] {
		t.Fatal("an array taken twice")
	}
}

func TestSpareArraysKeepAFewPerLength(t *testing.T) {
	var sp spareArrays[int]
	for range maxSpares + 5 {
		sp.give(make([]int, 3))
	}
	sp.give(nil)
	if n := len(sp.byLen[3]); n != maxSpares {
		t.Fatalf("kept %d arrays of one length, want %d", n, maxSpares)
	}
	if _, ok := sp.byLen[0]; ok {
		t.Fatal("kept an empty array")
	}
}

func TestSpareMapsComeBackEmptyAndStayBounded(t *testing.T) {
	var sp spareMaps[int32, touchedNode]
	if m := sp.take(); m != nil {
		t.Fatal("took a map where none was given")
	}
	m := map[int32]touchedNode{3: {score: 5, scored: true}}
	sp.give(m)
	got := sp.take()
	if got == nil || len(got) != 0 {
		t.Fatalf("took %v, want the map given back, empty", got)
	}
	got[1] = touchedNode{}
	if _, ok := m[1]; !ok {
		t.Fatal("took another map than the one given back")
	}

	// A map a large rollout grew is not kept: every later simulation
	// would clear all its room.
	large := make(map[int32]touchedNode, maxSpareMapLen+1)
	for i := range int32(maxSpareMapLen + 1) {
		large[i] = touchedNode{}
	}
	sp.give(large)
	if sp.take() != nil {
		t.Fatalf("kept a map of %d entries, over the bound of %d", maxSpareMapLen+1, maxSpareMapLen)
	}
	for range maxSpares + 5 {
		sp.give(map[int32]touchedNode{1: {}})
	}
	if n := len(sp.maps); n != maxSpares {
		t.Fatalf("kept %d maps, want %d", n, maxSpares)
	}
}
