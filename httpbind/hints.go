package httpbind

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/jetgate/jetgate/admission/ojs"
)

// The hint of an error envelope is one sentence that tells the client what
// to do. Errors that know more (the field of a validation error, the state
// a job must be in) set their own hint where they are classified; the rest
// get the hint of their code and status here.

// validationHint names the field to fix and the rule it must meet.
func validationHint(e *ojs.ValidationError) string {
	switch {
	case e.Field == "" || e.Field == "body":
		return "Send the request body as one valid JSON object (check quotes, commas and brackets)."
	case e.Rule == "required":
		return fmt.Sprintf("Add the required field '%s' and send the request again.", e.Field)
	case e.Rule != "":
		return fmt.Sprintf("Change '%s' so that it is %s, then send the request again.", e.Field, strings.TrimSuffix(e.Rule, "."))
	}
	return fmt.Sprintf("Fix '%s' as the message says and send the request again.", e.Field)
}

// stateHint says what state the operation needs and how to see the job's.
func stateHint(e *ojs.StateError) string {
	if e.Expected != "" {
		return fmt.Sprintf("Read the job (GET /ojs/v1/jobs/%s): it is '%s', and this operation needs it '%s'; do not repeat it.",
			e.JobID, e.Current, e.Expected)
	}
	return fmt.Sprintf("Read the job (GET /ojs/v1/jobs/%s): in state '%s' it no longer allows this operation.", e.JobID, e.Current)
}

// defaultHint is the hint of an error that did not set its own.
func defaultHint(e apiError) string {
	switch e.code {
	case ojs.CodeInvalidPayload:
		return "Fix the job envelope as the message says and send it again."
	case ojs.CodeNotFound:
		return notFoundHint(e.details)
	case ojs.CodeConflict:
		return "Read the resource's current state and act on it; repeating the request will not succeed."
	case ojs.CodeDuplicate:
		return "The job already exists: use the existing job (details.existing_job_id), or enqueue with another unique key."
	case ojs.CodeQueuePaused:
		return "Resume the queue (POST /ojs/v1/queues/{name}/resume), then send the request again."
	case ojs.CodeUnsupported:
		return "Leave out what the message names; GET /ojs/manifest lists what this server supports."
	case ojs.CodePayloadTooLarge:
		return "Send a smaller body: move large data out of args and pass a reference to it."
	case ojs.CodeRateLimited:
		return "Wait the Retry-After header's seconds before sending the request again."
	case ojs.CodeUnauthorized:
		return "Send the header 'Authorization: Bearer <token>' with a token the server is configured with."
	case ojs.CodeForbidden:
		return "Use a token of a role allowed this operation (details.required_roles)."
	case ojs.CodeQueueFull:
		return "Wait the Retry-After header's seconds and send the job again, or let workers drain the queue first."
	}
	switch e.status {
	case http.StatusMethodNotAllowed:
		return "Use one of the methods in the Allow header."
	case http.StatusServiceUnavailable:
		return "Send the request again after the Retry-After header's seconds, with backoff if it repeats."
	case http.StatusBadRequest:
		return "Fix the request as the message says and send it again."
	}
	if e.status >= 500 {
		return "Send the request again with backoff; if it keeps failing, give the operator the request_id."
	}
	return "Fix the request as the message says and send it again."
}

func notFoundHint(d map[string]any) string {
	kind, _ := d["resource_type"].(string)
	switch {
	case kind == "endpoint":
		return "Check the method and path: the OJS endpoints are under /ojs/v1 (GET /ojs/manifest lists them)."
	case kind != "":
		return fmt.Sprintf("Check the %s id: it names no %s here (it may never have existed or may have been removed).",
			strings.ReplaceAll(kind, "_", " "), strings.ReplaceAll(kind, "_", " "))
	}
	return "Check the id or name in the path: it names nothing here."
}
