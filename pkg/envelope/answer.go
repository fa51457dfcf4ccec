package envelope

// Answer is what ingress answered a webhook delivery: the "status" of its
// JSON answer, and, for a verified delivery, the answer its delivery
// history keeps (Receipt.Answer, the intake.deliveries.answer column). The
// values are wire format: providers read them and Postgres stores them.
type Answer string

// The answers. The history holds accepted, duplicate and unavailable: a
// rejected delivery was not verified, so it is never recorded.
const (
	// AnswerAccepted (200): INTAKE_IN stored the message; its history row
	// comes from the message, in the processor's batch.
	AnswerAccepted Answer = "accepted"
	// AnswerDuplicate (200): the stream's duplicate window stopped the
	// message, so INTAKE_IN already held it; a receipt records it.
	AnswerDuplicate Answer = "duplicate"
	// AnswerUnavailable (503 + Retry-After): no PubAck, the provider must
	// retry; a receipt records it.
	AnswerUnavailable Answer = "unavailable"
	// AnswerRejected (4xx, or 503 when busy): refused before publishing,
	// with a reason.
	AnswerRejected Answer = "rejected"
)
