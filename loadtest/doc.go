// Command loadtest drives a running hub with many tab sockets and runs.
package main
