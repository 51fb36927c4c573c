// Command hub is runhub's one binary.
package main

func main() {}
