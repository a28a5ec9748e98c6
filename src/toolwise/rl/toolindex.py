"""The catalogue as the learner sees it: a stable id for every tool ever seen, which tools are listed
now, and how well each matches a query (cosine of embeddings plus BM25, or BM25 alone).

What the learner learns is indexed by these ids, so the ids outlive the catalogue: a tool that
disappears and returns keeps its learning.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from toolwise.errors import UserError
from toolwise.rl.embedding import Embedder, SemanticIndex, name_words
from toolwise.rl.ids import Interner
from toolwise.rl.lexical import LexicalIndex
from toolwise.rl.names import NameIndex
from toolwise.rl.text import action_word, stem, tokenize


class UnknownToolError(UserError):
    def __init__(
        self, names: Iterable[str], meant: Mapping[str, str] | None = None, gone: Mapping[str, str] | None = None
    ) -> None:
        """`meant`: the listed name each unknown one may stand for, said beside it; `gone`: the server that
        listed it once and no longer does."""
        hints, servers = meant or {}, gone or {}

        def why(name: str) -> str:
            said = [f"its server {servers[name]!r} no longer lists it"] if name in servers else []
            said += [f"did you mean {hints[name]!r}?"] if name in hints else []
            return f"{name} ({'; '.join(said)})" if said else name

        super().__init__(f"unknown tool(s): {', '.join(why(n) for n in sorted(names))}")


Effect = Literal["reads", "writes", "destroys", "unknown"]  # what a call does, as the server's annotations say
# How much of its text relevance a tool that changes things gives up while nothing was learned of it:
# a destructive tool is never first on the words of a request alone (see `Features.caution`).
CAUTION: dict[Effect, float] = {"reads": 0.0, "writes": 0.25, "destroys": 0.6, "unknown": 0.0}
# A request that asks to act is for a tool that changes things ("start a bugfix branch off main" is not for "List
# Git branches"): where the catalogue says which of its tools do, one that only reads gives up this much for it,
# and one that destroys as much again of what it keeps (it stays as far below those that read as before).
ACTING = 0.3


@dataclass(frozen=True, slots=True)
class ToolDoc:
    name: str
    description: str = ""
    document: str = ""  # what the semantic prior embeds; defaults to the name's words and the description
    effect: Effect = "unknown"  # from the tool's annotations (learning/embedding.py's tool_effect)
    # its description's opening verb, its title left out (`action_word`); None: read from `description`
    action: str | None = None


class ToolIndex:
    def __init__(self, embedder: Embedder | None = None, lexical_weight: float = 0.25) -> None:
        """With `embedder` a query matches a tool by the cosine of their embeddings plus BM25 over the
        same documents weighted `lexical_weight`; without one by BM25 alone."""
        self.embedder = embedder
        self.lexical_weight = lexical_weight
        self.tools = Interner()
        self.descriptions: dict[str, str] = {}
        self.documents: dict[str, str] = {}
        self.effects: dict[str, Effect] = {}
        self.caution = np.zeros(0)  # CAUTION of each tool id's effect
        self.acting = np.zeros(0)  # the same for a request that asks to act (ACTING: `set_tools`)
        self.cautious = np.zeros(0, dtype=np.int64)  # the ids cautious for either (none, in most catalogues)
        self.action_of: dict[str, str] = {}  # each tool's description's opening verb, stemmed (`asks_for`)
        self.verbs: dict[str, int] = {}  # each of those verbs' number
        self.actions = np.zeros(0, dtype=np.int64)  # the number of each tool id's verb (len(verbs): none)
        self.active = np.zeros(0, dtype=np.int64)
        self.names = NameIndex([])
        self.lexical = LexicalIndex([])
        self.semantic: SemanticIndex | None = None
        self.unembedded: frozenset[str] = frozenset()  # documents BM25 alone scores until their vectors come

    def set_tools(
        self,
        tools: Sequence[ToolDoc],
        vectors: Mapping[str, NDArray[np.float32]] | None = None,
        later: Collection[str] = (),
    ) -> None:
        """The current catalogue. Ids are stable: a tool that disappears and returns keeps its id.
        `vectors`: documents' vectors embedded ahead (off the event loop); any other new document is
        embedded here, but those in `later`: their cosine is 0 (BM25 alone scores them, `unembedded`)
        until the catalogue comes again with their vectors (a server answers while its first catalogue embeds)."""
        for tool in tools:
            self.tools.intern(tool.name)
            self.descriptions[tool.name] = tool.description
            if tool.document or tool.name not in self.documents:  # a restored state's docs name no parameters
                self.documents[tool.name] = tool.document or f"{name_words(tool.name)}. {tool.description}"
            if tool.effect != "unknown" or tool.name not in self.effects:  # nor annotations
                self.effects[tool.name] = tool.effect
            if tool.action is not None or tool.name not in self.action_of:
                self.action_of[tool.name] = action_word(tool.description) if tool.action is None else tool.action
        self.active = np.array([self.tools.intern(t.name) for t in tools], dtype=np.int64)
        effects = np.array([self.effects.get(name, "unknown") for name in self.tools.names], dtype=object)
        self.caution = np.array([CAUTION[effect] for effect in effects])
        self.acting = self.caution
        if np.isin(effects.take(self.active), ["writes", "destroys"]).any():  # the catalogue says which tools act
            others = effects != "writes"
            self.acting = np.where(others, 1 - (1 - self.caution) * (1 - ACTING), self.caution)
            self.acting[effects == "unknown"] = 0.0
        self.cautious = np.flatnonzero(self.acting)
        verbs = [self.action_of.get(name, "") for name in self.tools.names]
        self.verbs = {verb: n for n, verb in enumerate(dict.fromkeys(v for v in verbs if v))}
        self.actions = np.array([self.verbs.get(verb, len(self.verbs)) for verb in verbs], dtype=np.int64)
        self.names = NameIndex(self.tools.names)
        if self.embedder is not None:  # vectors of unchanged documents are kept, not recomputed
            known = self.vectors
            if vectors:
                known = {**known, **vectors}
            texts = [self.documents.get(name, name_words(name)) for name in self.tools.names]
            self.unembedded = frozenset(text for text in texts if text not in known and text in later)
            if self.unembedded:
                blank = np.zeros(self._width(known), np.float32)
                known = {**known, **dict.fromkeys(self.unembedded, blank)}
            self.semantic = SemanticIndex(self.embedder, texts, known, self.semantic)  # its query vectors kept
            self.lexical = LexicalIndex(texts)
        else:
            documents = [f"{name.replace('__', ' ')} {self.descriptions.get(name, '')}" for name in self.tools.names]
            self.lexical = LexicalIndex(documents)

    @property
    def vectors(self) -> dict[str, NDArray[np.float32]]:
        """The vector of each document embedded so far, by its text (read-only: never changed, replaced)."""
        if self.semantic is None:
            return {}
        if self.unembedded:
            return {d: v for d, v in self.semantic.by_document.items() if d not in self.unembedded}
        return self.semantic.by_document

    def _width(self, known: Mapping[str, NDArray[np.float32]]) -> int:
        """The embedder's vector width: a known vector's, else that of an empty text's (cheap)."""
        for vector in known.values():
            return len(vector)
        assert self.embedder is not None
        return int(self.embedder.embed([""]).shape[1])

    def restore(
        self,
        names: Sequence[str],
        descriptions: dict[str, str],
        active: Sequence[int],
        documents: Mapping[str, str] | None = None,
        *,
        effects: Mapping[str, Effect] | None = None,
        actions: Mapping[str, str] | None = None,
    ) -> None:
        """The ids, descriptions, documents, effects and verbs (what the prior reads: a tool no longer listed
        keeps its own, as before the save) and listed tools of a saved state (its ids are what it learned by);
        the documents still waiting to be embedded wait on (their vectors come with the catalogue)."""
        self.tools = Interner(names)
        self.descriptions = dict(descriptions)
        self.documents = {**self.documents, **(documents or {})}
        self.effects = {**self.effects, **(effects or {})}
        self.action_of = {**self.action_of, **(actions or {})}
        listed = [self.tools.names[i] for i in active]
        self.set_tools([ToolDoc(name, self.descriptions.get(name, "")) for name in listed], later=self.unembedded)

    def caution_of(self, arms: NDArray[np.int64], acting: bool = True) -> NDArray[np.float64]:
        """The share of its text relevance each of `arms` gives up while nothing was learned of it, for a request
        that asks to act (`acting`: not 0 for every tool cautious at all) or not (CAUTION); 0 for a tool the
        catalogue never described."""
        caution = self.acting if acting else self.caution
        if not len(caution):
            return np.zeros(len(arms))
        out: NDArray[np.float64] = np.where(arms < len(caution), caution.take(np.minimum(arms, len(caution) - 1)), 0.0)
        return out

    def asks_for(self, query: str, arms: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Which of `arms` `query` asks for by what its description says it does: one of the query's words,
        stemmed, is the verb the description opens with ("switch to develop" and "Switches branches")."""
        named = [n for word in tokenize(query) if (n := self.verbs.get(stem(word))) is not None]
        if not named:  # most requests name no tool's verb
            return np.zeros(len(arms), dtype=bool)
        wanted = np.zeros(len(self.verbs) + 1, dtype=bool)  # the last slot: a tool with no verb
        wanted[named] = True
        inside = arms < len(self.actions)
        asked: NDArray[np.bool_] = inside & wanted.take(self.actions.take(np.where(inside, arms, 0)))
        return asked

    @property
    def active_names(self) -> list[str]:
        return [self.tools.names[i] for i in self.active]

    def arms(self, candidates: Iterable[str] | None) -> NDArray[np.int64]:
        """The ids of `candidates` (the listed tools when None), or UnknownToolError naming the strangers."""
        if candidates is None:
            return self.active
        names = list(dict.fromkeys(candidates))
        unknown = [n for n in names if n not in self.tools]
        if unknown:
            raise UnknownToolError(unknown)
        return np.array([self.tools.intern(n) for n in names], dtype=np.int64)

    def scores(self, query: str | None) -> NDArray[np.float64]:
        """How well `query` matches each tool, in [0, 1]: cosine plus weighted BM25 rescaled, or BM25
        alone without an embedder or a query. Read-only when BM25 alone (cached): copy to change it."""
        if self.semantic is not None and query:
            w = self.lexical_weight
            scores = self.semantic.scores(query) + w * self.lexical.scores(query)
            scores /= 1 + w
            return scores
        return self.lexical.scores(query or "")

    def scores_at(self, query: str | None, arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """`scores(query).take(arms)`, the same numbers, without combining the two scores of every tool
        (0 for a tool with no document: interned since, by a learned call of a tool the catalogue does not list)."""
        if not self.knows(arms):
            out = np.zeros(len(arms))
            known = arms < len(self.lexical)
            out[known] = self.scores_at(query, arms[known])
            return out
        if self.semantic is not None and query:
            w = self.lexical_weight
            scores = self.semantic.scores(query).take(arms) + w * self.lexical.scores(query).take(arms)
            scores /= 1 + w
            return scores
        return self.lexical.scores(query or "").take(arms)

    def score(self, query: str | None, arm: int) -> float:
        """`scores(query)[arm]` (0 for a tool the index has no document of), without a fresh array."""
        if self.semantic is None or not query:
            scores = self.lexical.scores(query or "")
            return float(scores[arm]) if arm < len(scores) else 0.0
        if arm >= len(self.semantic):
            return 0.0
        w = self.lexical_weight
        return (float(self.semantic.scores(query)[arm]) + w * float(self.lexical.scores(query)[arm])) / (1 + w)

    def text_columns(
        self, query: str, arms: NDArray[np.int64], out: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        """The choice model's first two features of `arms`: the query's cosine and BM25 against each
        (BM25 alone in the first column without an embedder), written into `out` (zeros, arms × 2) if given."""
        known = slice(None) if self.knows(arms) else arms < len(self.lexical)
        columns = np.zeros((len(arms), 2)) if out is None else out
        lexical = self.lexical.scores(query).take(arms[known])
        if self.semantic is not None:
            columns[known, 0] = self.semantic.scores(query).take(arms[known])
            columns[known, 1] = lexical
        else:
            columns[known, 0] = lexical
        return columns

    def knows(self, arms: NDArray[np.int64]) -> bool:
        """Whether every one of `arms` has a document (the listed tools always have: a decision's usual
        arms, which then need no mask)."""
        return arms is self.active or not len(arms) or int(arms.max()) < len(self.lexical)

    def repeat_column(self, history: Sequence[str], arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """1 for each of `arms` the session already called (within `history`), else 0."""
        column = np.zeros(len(arms))
        for arm in {arm for arm in self.tools.ids(history) if arm >= 0}:  # a few: a comparison each, not `isin`
            column[arms == arm] = 1.0
        return column
