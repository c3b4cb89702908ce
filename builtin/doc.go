// Package builtin registers the providers the berth binary ships: local, e2b
// (alias agentenv), daytona and modal, each as a registry entry whose values
// follow the facts file miles-sandbox-layer.md.
//
// Only cmd/berth calls Register(registry.Default), in one place; tests use
// Registry() for a fresh registry. Provider packages import without side
// effects, so importing this package registers nothing by itself.
package builtin
