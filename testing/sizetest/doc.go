// Package sizetest keeps the worker binary small: its test builds minimal
// pipelines in a module of their own, with and without beamdedup's
// transforms, and fails when importing them costs more than the bound
// (docs/runners.md, "Worker binary size").
package sizetest
