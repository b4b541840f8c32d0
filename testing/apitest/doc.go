// Package apitest holds the public API to its list: every name the library
// packages (transforms/... and coders/..., internal packages aside) export,
// and every exported method of their exported types, is listed per package
// in docs/development.md ("The public API"), and the list names nothing
// more. A name a user does not call or read has no place there: its home
// is an internal package.
package apitest
