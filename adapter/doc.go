// Package adapter is the RuntimeAdapter: the seam through which the hub
// starts runs and routes controls to whoever executes them.
package adapter
