package delivery

// What the external tests (package delivery_test, which may import the resources that import
// delivery) reach of the package's unexported parts.
var (
	Redact        = redact
	RevisionClass = revisionClass
)

// RedactedText is what stands in for a hidden value.
const RedactedText = redactedText
