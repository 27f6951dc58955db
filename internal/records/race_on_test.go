//go:build race

package records

const raceDetector = true
