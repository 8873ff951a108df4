// Package engine is layerrule's fixture.
package engine
