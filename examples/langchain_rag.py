"""A RAG chain, ``retriever | prompt | llm``, over BeeWeave memories.

The chain returns the answer with the memories it was given, each with its id,
score and the retrievers that found it (Document.metadata).

    python examples/langchain_rag.py
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_models import chat_model

from beeweave_core import BeeWeave
from beeweave_langchain import BeeWeaveRetriever

FACTS = [
    "The staging database listens on port 5433.",
    "Deploys to production need an approval from the on-call engineer.",
    "The weekly ops report is due every Friday at noon.",
    "用户对花生过敏。",
    "The Kubernetes cluster for the EU runs in eu-west-1.",
]

PROMPT = ChatPromptTemplate.from_messages([
    ("system", "Answer from the memories below; say so if they do not contain the answer.\n\n{context}"),
    ("human", "{question}"),
])


def prompt_inputs(x: dict[str, Any]) -> dict[str, str]:
    docs: Sequence[Document] = x["context"]
    return {"context": "\n".join(f"- {d.page_content}" for d in docs), "question": x["question"]}


def main(embedder: Any = None, question: str = "Who has to approve a production deploy?") -> dict[str, Any]:
    with BeeWeave(embedder=embedder) as memory:
        memory.add_many([{"content": f, "user_id": "team-ops", "tags": ["ops"]} for f in FACTS])
        retriever = BeeWeaveRetriever(memory=memory, user_id="team-ops", k=2)
        llm = chat_model(["A production deploy needs an approval from the on-call engineer."])
        # retriever | prompt | llm, keeping the retrieved memories beside the answer
        chain = RunnableParallel(context=retriever, question=RunnablePassthrough()).assign(
            answer=RunnableLambda(prompt_inputs) | PROMPT | llm | StrOutputParser())
        result = chain.invoke(question)
        print(f"Q: {question}\nA: {result['answer']}")
        for doc in result["context"]:
            print(f"  [{doc.metadata['score']:.3f}] {doc.page_content}  (id {doc.metadata['id'][:8]}, "
                  f"found by {', '.join(doc.metadata['sources'])})")
        return result


if __name__ == "__main__":
    main()
