package client

// StreamNameForTest exposes streamName to the external tests.
var StreamNameForTest = streamName
