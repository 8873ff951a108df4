// Command tiny stands in for the manager where test/image checks how the image
// tool assembles several platforms: cross-compiling it takes seconds, the
// manager minutes.
package main

func main() {}
