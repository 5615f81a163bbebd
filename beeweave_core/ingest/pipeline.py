"""From one knowledge event to the memories it becomes.

How an event becomes memories:

- **one turn memory** ``<event id>@<user>:0`` holding the question and the answer together. A
  later question like this one should find the answer *with* the question it answered:
  alone, an answer ("Use --force.") is often meaningless, and the question is the best
  retrieval key for it;
- **one memory per tool call with a meaningful result** ``<event id>@<user>:<step>`` (1-based):
  what a tool returned (a weather report, a query result, a page) is a fact in its own
  right, to be found later by its own content, whatever question led to it. Failed calls,
  empty or very short outputs, and an output repeated verbatim as the answer are not
  memories of their own; the turn memory lists every tool used and every error. Calls of
  the memory's own tools (save, search, recall) are never memories, and a run that called
  only them is not captured at all (:mod:`.memory_tools`).

The caller's ``tags`` come first on every memory of the event, then the extracted ones
(an extracted tag equal to a caller's one but for case is dropped); ``expires_at``,
``pinned``, ``confidence`` and ``importance`` (the starting ``weight``) are the caller's
when given, and ``category`` is kept in the metadata. What the extractor judged is used
where the caller said nothing: its ``confidence`` becomes the memory's, its ``category``
and ``importance`` (in [0, 1]) go to ``metadata["category"]`` / ``metadata["importance"]``,
and admission sees both (``AdmissionRules.min_confidence`` / ``min_importance``).

Ids derive from the event id and the user (:mod:`beeweave_core.ids`), so processing an event
twice stores nothing twice, and two users' events of one id are two events.
Every memory of a rated event keeps the rating (``metadata["ingest"]["feedback"]``); once
they are stored, the worker applies it to them (:mod:`.runtime`).
Redaction runs first, on every text, tool value and metadata value, before anything is
normalized, extracted, embedded or stored.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ..ids import event_memory_id
from ..lifecycle.timeline import FACT_KEY, stated_fact
from ..records import ChunkStatus, ContentType, Intent, KnowledgeChunk, ProcessedContent
from ..validation import importance_of
from .admission import Candidate, admit
from .config import IngestConfig
from .documents import DocChunk
from .extract import REDACTION_TOKEN, Extraction, Extractor, OfflineExtractor
from .knowledge_events import KnowledgeEvent, ToolCall
from .memory_tools import METADATA_KEY, event_memory_tools, is_memory_tool, memory_only
from .normalize import normalize
from .patterns import Sighting
from .redact import Redactor
from .small_talk import is_small_talk
from .statements import find_statements
from .validate import EVENT_KEYS

__all__ = ["Prepared", "Pipeline", "chunk_ids", "redact_event"]


@dataclass
class Prepared:
    """The memories of one event, ready for ``add_many``, and the question it asked."""

    event: KnowledgeEvent
    chunks: list[KnowledgeChunk] = field(default_factory=list)
    sighting: Sighting | None = None


def chunk_ids(event_id: str, user_id: str, n_steps: int) -> list[str]:
    """Every id an event's memories can have (the turn, then each step)."""
    return [event_memory_id(event_id, user_id, i) for i in range(n_steps + 1)]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def redact_event(redactor: Redactor, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
    """A redacted copy of a queued event body and the redaction counts per part
    ("turn", "step1", ...). A body marked ``redacted`` is returned as is."""
    if body.get("redacted") or not redactor.enabled:
        return body, dict(body.get("redactions") or {})
    turn: Counter[str] = Counter()
    out = dict(body, query=redactor.redact(body.get("query") or "", turn),
               response=redactor.redact(body.get("response") or "", turn))
    counts: dict[str, dict[str, int]] = {"turn": dict(turn)} if turn else {}
    steps = []
    for i, step in enumerate(body.get("intermediate_steps") or [], start=1):
        c: Counter[str] = Counter()
        steps.append(dict(step, input=redactor.redact_value(step.get("input"), c),
                          output=redactor.redact_value(step.get("output"), c),
                          error=None if step.get("error") is None else redactor.redact(str(step["error"]), c)))
        if c:
            counts[f"step{i}"] = dict(c)
    out["intermediate_steps"] = steps
    if body.get("tags"):
        tc: Counter[str] = Counter()
        out["tags"] = [t for t in (redactor.redact(t, tc).strip() for t in body["tags"]) if t]
        if tc:
            counts["tags"] = dict(tc)
    if body.get("category"):
        out["category"] = redactor.redact(body["category"]) or body["category"]
    if body.get("metadata"):
        mc: Counter[str] = Counter()
        out["metadata"] = redactor.redact_tree(body["metadata"], mc)
        if mc:
            counts["metadata"] = dict(mc)
    out["redacted"] = True
    out["redactions"] = counts
    return out, counts


class Pipeline:
    """Normalize, redact, extract and admit: everything before embedding and storing."""

    def __init__(self, config: IngestConfig) -> None:
        self.config = config
        self.redactor = Redactor(config.pii_kinds, config.custom_patterns, enabled=config.redact)
        self.extractor: Extractor = config.extractor or OfflineExtractor()
        self.offline = OfflineExtractor()

    @property
    def concurrent(self) -> bool:
        """Whether events are prepared side by side: a model extractor and ``max_concurrency`` > 1.
        The offline extractor holds the GIL, so threads would only add switching."""
        return self.config.max_concurrency > 1 and not isinstance(self.extractor, OfflineExtractor)

    def prepare_many(self, bodies: Sequence[dict[str, Any]]
                     ) -> Generator[tuple[dict[str, Any], Prepared | Exception], None, None]:
        """Each body redacted and prepared, in the order given: the body as redacted (the one a
        failure keeps in the dead letters) and its ``Prepared``, or the exception it raised.

        When :attr:`concurrent`, up to ``max_concurrency`` events are prepared at once (the
        time goes to waiting for the model, and threads wait together), and each result is
        yielded as soon as it and those before it are ready: the caller stores the first ones
        while the model still reads the rest. Closing the iterator early cancels the calls
        not started yet."""
        if not self.concurrent or len(bodies) <= 1:
            yield from map(self._prepare_one, bodies)
            return
        pool = ThreadPoolExecutor(min(self.config.max_concurrency, len(bodies)), thread_name_prefix="beeweave-extract")
        try:
            yield from pool.map(self._prepare_one, bodies)  # all submitted at once, yielded in order
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _prepare_one(self, body: dict[str, Any]) -> tuple[dict[str, Any], Prepared | Exception]:
        try:
            body, _ = redact_event(self.redactor, body)
            return body, self.prepare(body)
        except Exception as exc:  # the event's own failure (dead letter), not the batch's
            return body, exc

    def prepare(self, body: dict[str, Any]) -> Prepared:
        body, redactions = redact_event(self.redactor, body)
        fields = {k: body[k] for k in EVENT_KEYS if k in body}
        event = KnowledgeEvent.from_dict(fields)
        out = Prepared(event)
        tools = tuple(dict.fromkeys(s.tool for s in event.intermediate_steps))
        intent = Intent.OTHER
        query, response = event.query.strip(), event.response.strip()
        turn_extraction: Extraction | None = None
        own = event_memory_tools(event.metadata, self.config.memory_tools)
        if memory_only(event.intermediate_steps, own):  # it saved or recalled: nothing new to learn
            return out
        if self.config.skip_small_talk and not event.intermediate_steps and is_small_talk(query, response):
            return out  # "Thanks!" / "You're welcome!", "Recommend a novel." / "OK.": nothing to learn
        if query or response:
            turn_extraction = self._turn(out, query, response, tools, redactions.get("turn"))
            intent = turn_extraction.intent
        if self.config.tool_memories:
            for i, step in enumerate(event.intermediate_steps, start=1):
                if not is_memory_tool(step.tool, own):  # never re-store a save or a recall
                    self._tool(out, i, step, response, intent, redactions.get(f"step{i}"))
        if query:
            out.sighting = Sighting(event.id, event.user_id, event.agent_id, query, intent, event.at,
                                    answer=response, answer_id=event_memory_id(event.id, event.user_id, 0),
                                    tags=turn_extraction.tags if turn_extraction else ())
        return out

    def _base_metadata(self, event: KnowledgeEvent, role: str, **extra: Any) -> dict[str, Any]:
        info = {"event_id": event.id, "role": role, **{k: v for k, v in extra.items() if v not in (None, [], {}, ())}}
        meta = {**{k: v for k, v in event.metadata.items() if k != METADATA_KEY}, "ingest": info}
        if event.category is not None:
            meta["category"] = event.category
        return meta

    @staticmethod
    def _caller_fields(ev: KnowledgeEvent, extracted: list[str]) -> dict[str, Any]:
        """What the caller said about the memories, over what extraction found."""
        mine = {t.casefold() for t in ev.tags}
        fields: dict[str, Any] = {"tags": [*ev.tags, *(t for t in extracted if t.strip() and t.casefold() not in mine)]}
        if ev.expires_at is not None:
            fields["expires_at"] = ev.expires_at
        if ev.pinned is not None:
            fields["pinned"] = ev.pinned
        if ev.confidence is not None:
            fields["confidence"] = ev.confidence
        if ev.importance is not None:
            fields["weight"] = ev.importance
        return fields

    def _chunk(self, out: Prepared, n: int, raw: str, pc: ProcessedContent, ext: Extraction, intent: Intent,
               candidate: Candidate, metadata: dict[str, Any]) -> None:
        ev = out.event
        judged: dict[str, Any] = {}
        if ext.category and "category" not in metadata:
            metadata["category"] = ext.category
        if ext.importance is not None and "importance" not in metadata:
            metadata["importance"] = ext.importance
        if ext.confidence is not None and ev.confidence is None:
            judged["confidence"] = ext.confidence
        if ext.extra.get("raw_excerpt"):
            metadata["ingest"]["raw_excerpt"] = ext.extra["raw_excerpt"]
        candidate = replace(candidate, confidence=ev.confidence if ev.confidence is not None else ext.confidence,
                            importance=importance_of(metadata["importance"]) if "importance" in metadata else None)
        status, reasons = admit(self.config.admission, candidate)
        if reasons:
            metadata["ingest"]["review"] = reasons
        out.chunks.append(KnowledgeChunk(
            raw_content=raw, user_id=ev.user_id, id=event_memory_id(ev.id, ev.user_id, n), agent_id=ev.agent_id, session_id=ev.session_id,
            processed_content=pc, summary=ext.summary or None,
            entities=[e for e in ext.entities if e.strip()], intent=intent, timestamp=ev.at,
            status=status, tier=self.config.tier, metadata=metadata,
            valid_from=ev.timestamp if stated_fact(metadata) is not None else None,
            **{**judged, **self._caller_fields(ev, list(ext.tags))}))

    def _turn(self, out: Prepared, query: str, response: str, tools: tuple[str, ...],
              redactions: dict[str, int] | None) -> Extraction:
        ev = out.event
        r_pc = normalize(response) if response else None
        q_pc = normalize(query) if query else None
        # The answer decides the type (code, data); a question that holds code or data decides otherwise.
        if r_pc is not None and (r_pc.type is not ContentType.TEXT or q_pc is None or q_pc.type is ContentType.TEXT):
            shape, parts = r_pc, (query, r_pc.text)
        else:  # no answer, or a plain answer to a question holding code or data
            assert q_pc is not None  # the event has a query or a response (checked when it was queued)
            shape, parts = q_pc, (q_pc.text, response)
        text = "\n\n".join(p for p in parts if p)
        pc = ProcessedContent(shape.type, text, shape.language, shape.payload)
        raw = "\n\n".join(p for p in (query, response) if p)
        ext = self.extractor.extract(query, response, content=shape)
        errors = [{"tool": s.tool, "error": s.error} for s in ev.intermediate_steps if s.error]
        # query_chars lets a reader split the turn back into question and answer (the design's results).
        meta = self._base_metadata(ev, "turn", tools=list(tools), tool_errors=errors, feedback=ev.feedback,
                                   redactions=redactions, extractor=ext.extra.get("extractor"),
                                   query_chars=len(query) if query and response else None)
        stated = ext.facts if ext.facts is not None else tuple(find_statements(query))
        if stated:
            # The turn carries the first fact it states; the lifecycle's timeline decides what it
            # supersedes once it is stored (``IngestSink.reconcile``).
            fact = stated[0]
            meta[FACT_KEY] = {**fact.to_dict(), "redacted": bool(REDACTION_TOKEN.search(fact.value))}
        candidate = Candidate(raw, ev.user_id, ev.agent_id, tools, ev.feedback, "turn", states_fact=bool(stated))
        self._chunk(out, 0, raw, pc, ext, ext.intent, candidate, meta)
        return ext

    def _tool(self, out: Prepared, n: int, step: ToolCall, response: str, intent: Intent,
              redactions: dict[str, int] | None) -> None:
        if step.error:
            return
        output = _text(step.output).strip()
        if len(output) < self.config.min_tool_output_chars or output == response:
            return
        cap = self.config.max_tool_output_chars
        if len(output) > cap:
            output = output[:cap] + f"\n…[{len(output) - cap} more characters not kept]"
        given = _text(step.input).strip()
        head = f"{step.tool}: {given}" if given else step.tool
        pc_out = normalize(output)
        pc = ProcessedContent(pc_out.type, f"{head}\n{pc_out.text}", pc_out.language, pc_out.payload)
        raw = f"{head}\n{output}"
        # Tool outputs use the offline extractor: one model call per event, not per tool call.
        ext = self.offline.extract("", output, content=pc_out)
        ext = replace(ext, summary=f"{step.tool}: {ext.summary}" if ext.summary else step.tool)
        ev = out.event
        meta = self._base_metadata(ev, "tool", tool=step.tool, step=n, feedback=ev.feedback, redactions=redactions)
        candidate = Candidate(raw, ev.user_id, ev.agent_id, (step.tool,), ev.feedback, "tool")
        self._chunk(out, n, raw, pc, ext, intent, candidate, meta)

    def document_chunk(self, dc: DocChunk, *, user_id: str, agent_id: str | None, tags: list[str],
                       status: ChunkStatus, now: datetime) -> KnowledgeChunk:
        """A seed memory for one chunk of an imported document (redacted, normalized, extracted)."""
        counts: Counter[str] = Counter()
        text = self.redactor.redact(dc.text, counts)
        question = self.redactor.redact(dc.question, counts) if dc.question else ""
        answer = text[len(question):].strip() if question and text.startswith(question) else text
        pc = normalize(answer)
        if question:
            pc = ProcessedContent(pc.type, f"{question}\n\n{pc.text}", pc.language, pc.payload)
        ext = self.offline.extract(question, answer, content=pc)
        # The heading path starts the chunk's text too: redacted, counted once (there).
        heading = self.redactor.redact(dc.heading) if isinstance(dc.heading, str) else dc.heading
        extra = self.redactor.redact_tree(dc.metadata, counts)  # e.g. the other fields of a JSONL record
        info = {"role": "document", "document": dc.document, "chunk": dc.index, "heading": heading,
                "redactions": dict(counts) or None}
        return KnowledgeChunk(
            raw_content=text, user_id=user_id, id=dc.chunk_id(user_id), agent_id=agent_id, processed_content=pc,
            summary=ext.summary or None, tags=list(dict.fromkeys([*tags, *dc.tags, *ext.tags])),
            entities=list(ext.entities), intent=ext.intent if question else None, timestamp=now, status=status,
            metadata={**extra, "ingest": {k: v for k, v in info.items() if v is not None}})
