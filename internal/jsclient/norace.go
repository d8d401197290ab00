//go:build !race

package jsclient

const raceBuild = false
