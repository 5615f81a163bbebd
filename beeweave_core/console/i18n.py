"""The console's own labels in English and Chinese, and which language a request gets.

Only the console's words are translated; memories are shown as they were written.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MESSAGES", "LANGUAGES", "pick_language"]

LANGUAGES = {"en": "English", "zh": "中文"}

MESSAGES: dict[str, dict[str, str]] = {
    "en": {
        "title": "BeeWeave console", "skip": "Skip to the content", "nav": "Sections", "memories": "Memories", "review": "Review",
        "dashboard": "Dashboard", "graph": "Graph", "language": "Language", "sign_out": "Sign out",
        "sign_in": "Sign in", "api_key": "API key", "sign_in_help": "The key is kept in this browser tab only.",
        "bad_key": "This API key was not accepted.", "signed_in_as": "Tenant", "all_users": "all users",
        "user_scope": "User", "loading": "Loading…", "error": "Error", "not_found": "No such memory.",
        "search": "Search", "query": "Search text", "query_help": "Empty: list memories oldest first.",
        "user": "User", "agent": "Agent", "session": "Session", "tags": "Tags", "tags_help": "comma separated",
        "since": "From", "until": "Until", "status": "Status", "type": "Type", "any": "any",
        "results": "Results", "no_results": "No memories match.", "score": "relevance", "sources": "matched by",
        "no_relevant": "No memory is relevant to this search.",
        "ungated": "Include unrelated memories (relevance gate off)",
        "previous": "Previous page", "next": "Next page", "page": "Page", "open": "Open",
        "content": "Content", "details": "Details", "metadata": "Metadata", "history": "History",
        "relationships": "Relationships", "feedback": "Feedback", "used": "used", "up": "helpful",
        "down": "not helpful", "edit_content": "Edit content", "save": "Save", "save_content": "Save content",
        "save_tags": "Save tags", "pin": "Pin", "unpin": "Unpin", "pinned": "pinned", "expiry": "Expires at",
        "set_expiry": "Set expiry", "clear_expiry": "Clear expiry", "never": "never", "archive": "Archive",
        "restore": "Make active", "delete": "Delete", "confirm": "Confirm", "cancel": "Cancel",
        "confirm_delete": "Delete this memory for good? This cannot be undone.",
        "confirm_archive": "Archive this memory? It stops appearing in searches.",
        "confirm_reject": "Reject (delete) the selected pending memories?",
        "saved": "Saved.", "deleted": "Deleted.", "archived": "Archived.", "no_history": "No earlier versions.",
        "no_relationships": "No relationships.", "replaced_at": "replaced at", "reason": "reason",
        "direction": "direction", "other": "other memory", "weight": "weight", "open_graph": "Open its graph",
        "id": "Id", "timestamp": "Time", "confidence": "Confidence", "access_count": "Accesses",
        "entities": "Entities", "summary": "Summary", "intent": "Intent", "none": "(none)",
        "pending": "Pending memories", "select_all": "Select all", "select": "Select",
        "approve_selected": "Approve selected", "reject_selected": "Reject selected",
        "no_pending": "Nothing waits for review.", "approved": "Approved", "rejected": "Rejected",
        "flags": "Lifecycle flags", "no_flags": "No memory is flagged.", "keep": "Keep", "reasons": "reasons",
        "flagged_at": "flagged at", "dead_letters": "Dead letters", "no_dead": "No failed events.",
        "retry_selected": "Retry selected", "retry_all": "Retry all", "retried": "Queued again",
        "event": "Event", "attempts": "attempts", "failed_at": "failed at",
        "total": "Memories", "searches": "Searches", "used_share": "Searches whose results were used",
        "queue": "Ingest queue", "growth": "Growth", "growth_help": "memories added and the live total",
        "added": "added", "live_total": "live total", "latency": "Search latency",
        "latency_none": "No searches recorded yet.", "by_status": "By status", "by_agent": "Source agents",
        "by_intent": "Intents", "hottest": "Hottest memories", "newest": "Newest memories",
        "hot_questions": "Hot recurring questions", "no_hot": "No recurring question is hot now.",
        "heat": "heat", "count": "count", "ms": "ms", "day": "day", "no_data": "No data yet.",
        "graph_of": "Neighbourhood of", "graph_pick": "Memory id", "show": "Show", "hops": "Hops",
        "legend": "Legend: memories and edge types", "zoom_in": "Zoom in", "zoom_out": "Zoom out", "reset": "Reset view",
        "graph_help": "Drag to pan, wheel or buttons to zoom, click or Enter on a memory to open it.",
        "graph_empty": "Give a memory id, or open a memory and follow “Open its graph”.",
        "nodes": "memories", "edges": "edges", "more_nodes": "more not shown", "mean": "mean", "per_day": "per day", "per_week": "per week",
        "per_month": "per month",
        "edge_semantic": "similar meaning", "edge_session": "same session", "edge_entity": "shared entity",
        "edge_tag": "shared tag", "edge_merged_into": "merged into", "edge_supports": "supports",
        "edge_contradicts": "contradicts", "edge_cites": "cites", "edge_causes": "causes",
        "edge_derived_from": "derived from", "edge_related": "related",
        "node_center": "this memory", "node_hop1": "one hop away", "node_hop2": "two hops away", "utc": "UTC",
        "status_active": "active", "status_pending": "pending", "status_archived": "archived",
        "status_merged": "merged", "status_expired": "expired",
    },
    "zh": {
        "title": "BeeWeave 控制台", "skip": "跳到正文", "nav": "栏目", "memories": "记忆", "review": "审核", "dashboard": "仪表盘",
        "graph": "关系图", "language": "语言", "sign_out": "退出", "sign_in": "登录", "api_key": "API 密钥",
        "sign_in_help": "密钥只保存在当前浏览器标签页中。", "bad_key": "此 API 密钥未被接受。",
        "signed_in_as": "租户", "all_users": "所有用户", "user_scope": "用户", "loading": "加载中…",
        "error": "错误", "not_found": "没有这条记忆。", "search": "搜索", "query": "搜索内容",
        "query_help": "留空：按时间从早到晚列出记忆。", "user": "用户", "agent": "智能体", "session": "会话",
        "tags": "标签", "tags_help": "用逗号分隔", "since": "起始", "until": "截止", "status": "状态",
        "type": "类型", "any": "全部", "results": "结果", "no_results": "没有匹配的记忆。", "score": "相关度",
        "no_relevant": "没有与此搜索相关的记忆。", "ungated": "包括不相关的记忆（关闭相关度门槛）",
        "sources": "命中方式", "previous": "上一页", "next": "下一页", "page": "第几页", "open": "打开",
        "content": "内容", "details": "详情", "metadata": "元数据", "history": "历史版本",
        "relationships": "关系", "feedback": "反馈", "used": "被使用", "up": "有帮助", "down": "没帮助",
        "edit_content": "编辑内容", "save": "保存", "save_content": "保存内容", "save_tags": "保存标签",
        "pin": "置顶", "unpin": "取消置顶", "pinned": "已置顶", "expiry": "过期时间", "set_expiry": "设置过期",
        "clear_expiry": "清除过期", "never": "永不", "archive": "归档", "restore": "恢复为有效",
        "delete": "删除", "confirm": "确认", "cancel": "取消", "confirm_delete": "永久删除这条记忆？此操作无法撤销。",
        "confirm_archive": "归档这条记忆？它将不再出现在搜索结果中。", "confirm_reject": "拒绝（删除）所选的待审核记忆？",
        "saved": "已保存。", "deleted": "已删除。", "archived": "已归档。", "no_history": "没有更早的版本。",
        "no_relationships": "没有关系。", "replaced_at": "替换于", "reason": "原因", "direction": "方向",
        "other": "另一条记忆", "weight": "权重", "open_graph": "查看关系图", "id": "编号", "timestamp": "时间",
        "confidence": "置信度", "access_count": "访问次数", "entities": "实体", "summary": "摘要", "intent": "意图",
        "none": "（无）", "pending": "待审核记忆", "select_all": "全选", "select": "选择",
        "approve_selected": "批准所选", "reject_selected": "拒绝所选", "no_pending": "没有待审核的记忆。",
        "approved": "已批准", "rejected": "已拒绝", "flags": "生命周期标记", "no_flags": "没有被标记的记忆。",
        "keep": "保留", "reasons": "原因", "flagged_at": "标记于", "dead_letters": "死信",
        "no_dead": "没有处理失败的事件。", "retry_selected": "重试所选", "retry_all": "全部重试",
        "retried": "已重新排队", "event": "事件", "attempts": "尝试次数", "failed_at": "失败于",
        "total": "记忆数", "searches": "搜索次数", "used_share": "结果被使用的搜索占比", "queue": "摄取队列",
        "growth": "增长", "growth_help": "新增的记忆和有效总数", "added": "新增", "live_total": "有效总数",
        "latency": "搜索延迟", "latency_none": "还没有记录到搜索。", "by_status": "按状态",
        "by_agent": "来源智能体", "by_intent": "意图", "hottest": "最热门的记忆", "newest": "最新的记忆",
        "hot_questions": "热门的重复问题", "no_hot": "目前没有热门的重复问题。", "heat": "热度", "count": "数量",
        "ms": "毫秒", "day": "日期", "no_data": "还没有数据。", "graph_of": "关系邻域：", "graph_pick": "记忆编号",
        "show": "显示", "hops": "跳数", "legend": "图例：记忆与边的类型", "zoom_in": "放大", "zoom_out": "缩小",
        "reset": "重置视图", "graph_help": "拖动以平移，滚轮或按钮缩放，点击或按回车打开记忆。",
        "graph_empty": "输入记忆编号，或打开一条记忆后点击“查看关系图”。", "nodes": "条记忆", "edges": "条边",
        "more_nodes": "条未显示", "mean": "平均", "per_day": "（每天）", "per_week": "（每周）", "per_month": "（每月）",
        "edge_semantic": "语义相近", "edge_session": "同一会话", "edge_entity": "共同实体", "edge_tag": "共同标签",
        "edge_merged_into": "合并到", "edge_supports": "支持", "edge_contradicts": "矛盾", "edge_cites": "引用",
        "edge_causes": "导致", "edge_derived_from": "派生自", "edge_related": "相关",
        "node_center": "当前记忆", "node_hop1": "相隔一跳", "node_hop2": "相隔两跳", "utc": "UTC 时间",
        "status_active": "有效", "status_pending": "待审核", "status_archived": "已归档", "status_merged": "已合并",
        "status_expired": "已过期",
    },
}


def pick_language(query: str | None, cookie: str | None, accept: str | None) -> str:
    """``?lang=`` first, then the ``bw_lang`` cookie, then the browser's Accept-Language."""
    for choice in (query, cookie):
        if choice in MESSAGES:
            return str(choice)
    for part in (accept or "").split(","):
        tag = part.split(";")[0].strip().lower()
        if tag[:2] in MESSAGES:
            return tag[:2]
    return "en"


def strings(lang: str) -> dict[str, Any]:
    return MESSAGES.get(lang, MESSAGES["en"])
