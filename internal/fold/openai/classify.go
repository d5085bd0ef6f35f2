package openai

import (
	"errors"
	"fmt"

	"github.com/foldstream/foldstream/internal/retry"
	goopenai "github.com/sashabaranov/go-openai"
)

// classify is retry.Classify with go-openai's error types understood: a
// provider's answer (APIError, or RequestError when the body was not the
// OpenAI error shape) is classified by its status, code, type and
// message; anything else (timeouts, connections, JSON) as retry does.
// The classification belongs to the backend because only it knows the
// client library's types.
func classify(err error) *retry.Error {
	var apiErr *goopenai.APIError
	if errors.As(err, &apiErr) {
		return retry.FromStatus(err, apiErr.HTTPStatusCode, codeString(apiErr.Code), apiErr.Type, apiErr.Message)
	}
	var reqErr *goopenai.RequestError
	if errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0 {
		msg := string(reqErr.Body)
		if reqErr.Err != nil {
			msg += " " + reqErr.Err.Error()
		}
		return retry.FromStatus(err, reqErr.HTTPStatusCode, "", "", msg)
	}
	return retry.Classify(err)
}

// codeString renders APIError.Code (string, int or absent) as a string.
func codeString(code any) string {
	switch c := code.(type) {
	case nil:
		return ""
	case string:
		return c
	default:
		return fmt.Sprint(c)
	}
}
