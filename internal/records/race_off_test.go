//go:build !race

package records

const raceDetector = false
