package engine

// asked is declared by the top layer; every layer below may not use it.
const asked = "?"

type answer struct{ text string }

func ask(s store) string { return s.first(answer{text: asked}) }
