package plugin

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// none is what kubectl prints in an empty table cell.
const none = "<none>"

// orNoneCell is s, or <none> when it is empty.
func orNoneCell(s string) string {
	if s == "" {
		return none
	}
	return s
}

// table writes a table as kubectl get does: columns aligned two spaces
// apart, <none> in an empty cell, and no header line with --no-headers.
type table struct {
	tw        *tabwriter.Writer
	noHeaders bool
}

func newTable(w io.Writer, noHeaders bool) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0), noHeaders: noHeaders}
}

// header writes the column names, unless the table has none.
func (t *table) header(columns ...string) {
	if !t.noHeaders {
		fmt.Fprintln(t.tw, strings.Join(columns, "\t"))
	}
}

// row writes one line; an empty cell reads <none>.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = none
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// line writes one line as it is: the blank cells of a row about a
// cluster, not a migration, have no value to be missing.
func (t *table) line(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }
