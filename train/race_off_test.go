//go:build !race

package train

const raceBuild = false
