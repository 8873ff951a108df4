package engine

// helpers.go is named by no layer.
func helper() string { return ask(store{}) }
