package replayer

import (
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// The API answers in apiclient's types, the one definition its clients
// decode; the functions here turn the store's rows into them. A nil list
// stays nil (JSON null) and an empty one empty ([]), as the rows came.

// eventHistory is what GET /api/v1/events/{integration}/{event_id} gathers
// from the store, field by field as apiclient.EventDetail shows it.
type eventHistory struct {
	store.EventRecord
	ConflictRecords []store.Conflict
	Deliveries      []store.DeliveryRecord
	Executions      []store.ExecutionRecord
	Replays         []store.ReplayRef
	Rejections      []store.Rejection
	ReplayedBodies  []store.Rejection
	Attempts        []store.Attempt
	// DispatchAttempts are the deliveries of its messages to HTTP destinations.
	DispatchAttempts []store.DispatchAttempt
}

func (h eventHistory) wire() apiclient.EventDetail {
	return apiclient.EventDetail{
		Event:            apiclient.Event(h.EventRecord),
		ConflictRecords:  wireAll(h.ConflictRecords, wireConflict),
		Deliveries:       wireAll(h.Deliveries, wireDelivery),
		Executions:       wireAll(h.Executions, wireExecution),
		Replays:          wireAll(h.Replays, wireReplayRef),
		Rejections:       wireAll(h.Rejections, wireRejection),
		ReplayedBodies:   wireAll(h.ReplayedBodies, wireRejection),
		HandlerAttempts:  wireAll(h.Attempts, wireAttempt),
		DispatchAttempts: wireAll(h.DispatchAttempts, wireDispatchAttempt),
	}
}

func wireAttempt(a store.Attempt) apiclient.HandlerAttempt {
	return apiclient.HandlerAttempt{StreamSeq: a.StreamSeq, Delivery: a.Delivery, MaxDeliver: a.MaxDeliver,
		Handler: a.Handler, ErrorClass: a.ErrorClass, Error: a.Error, FailedAt: a.FailedAt, NextAttemptAt: a.NextAttemptAt}
}

func eventPage(events []store.EventRecord, next string) apiclient.EventPage {
	return apiclient.EventPage{Events: wireAll(events, wireEvent), NextCursor: next}
}

func conflictPage(list []store.Conflict, next string) apiclient.ConflictPage {
	return apiclient.ConflictPage{Conflicts: wireAll(list, wireConflict), NextCursor: next}
}

func rejectionPage(list []store.Rejection, next string) apiclient.RejectionPage {
	return apiclient.RejectionPage{Rejections: wireAll(list, wireRejection), NextCursor: next}
}

func replayPage(list []store.Replay, next string) apiclient.ReplayPage {
	return apiclient.ReplayPage{Replays: wireAll(list, wireReplay), NextCursor: next}
}

// Rows whose fields are the wire type's, one for one, convert as structs:
// a field added to one and not the other fails to compile here.

func wireEvent(e store.EventRecord) apiclient.Event { return apiclient.Event(e) }

func wireConflict(c store.Conflict) apiclient.Conflict { return apiclient.Conflict(c) }

func wireExecution(x store.ExecutionRecord) apiclient.ExecutionRecord {
	return apiclient.ExecutionRecord(x)
}

func wireReplayRef(r store.ReplayRef) apiclient.ReplayRef { return apiclient.ReplayRef(r) }

func wireOutcomeCount(c store.OutcomeCount) apiclient.OutcomeCount { return apiclient.OutcomeCount(c) }

// The others carry store-only fields (the parsed key, the resume point).

func wireDelivery(d store.DeliveryRecord) apiclient.Delivery {
	return apiclient.Delivery{ReceiptID: d.ReceiptID, ReceivedAt: d.ReceivedAt, Instance: d.Instance,
		StatusCode: d.StatusCode, Answer: d.Answer, RetryHints: d.RetryHints}
}

func wireRejection(r store.Rejection) apiclient.Rejection {
	return apiclient.Rejection{ID: r.ID, Key: r.Key, Integration: r.Integration, Account: r.Account, EventID: r.EventID,
		Tenant: r.Tenant, EventType: r.EventType, PayloadSHA256: r.PayloadSHA256, StreamSeq: r.StreamSeq,
		Subject: r.Subject, MsgID: r.MsgID, ReplayID: r.ReplayID, ReplayMode: r.ReplayMode, Reason: r.Reason,
		Detail: r.Detail, ReceivedAt: r.ReceivedAt, RejectedAt: r.RejectedAt, OriginalKey: r.OriginalKey}
}

func wireReplay(r store.Replay) apiclient.Replay {
	return apiclient.Replay{ID: r.ID, RequestedBy: r.RequestedBy, CreatedAt: r.CreatedAt, Selector: r.Selector,
		Mode: r.Mode, Reason: r.Reason, DryRun: r.DryRun, Rate: r.Rate, AdmitReplayedBodies: r.AdmitReplayedBodies,
		State: r.State, Matched: r.Matched,
		Published: r.Published, Duplicates: r.Duplicates, Outcomes: r.Outcomes,
		Counts: wireAll(r.Counts, wireOutcomeCount), Sample: r.Sample, UnknownKeys: r.UnknownKeys, CancelledBy: r.CancelledBy, Error: r.Error,
		FinishedAt: r.FinishedAt, ApprovedBy: r.ApprovedBy, ApprovedAt: r.ApprovedAt}
}

func wireAll[R, W any](rows []R, wire func(R) W) []W {
	if rows == nil {
		return nil
	}
	out := make([]W, len(rows))
	for i, r := range rows {
		out[i] = wire(r)
	}
	return out
}
