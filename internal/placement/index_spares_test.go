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
