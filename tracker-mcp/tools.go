package tracker

import (
	"github.com/crewlet/hub/servers"
)

// Tools is the tracker's tool table. Reads deliver nowhere; every write puts
// something on the board in front of whoever reads it, so it delivers to the
// tracker (WR-9).
func Tools(d Deps) []servers.Tool {
	s := newSrv(d)
	return []servers.Tool{
		servers.Typed("list_work_items",
			"Page through work items, newest first, narrowed by project, status, assignee (me for yourself), label, priority or parent. Check here before filing: the work may already have an item, and your own queue is assignee me.",
			readHints, "", s.listWorkItems),
		servers.Typed("get_work_item",
			"Read a single work item, by key or by id, with its description, comment thread, checklist, links, subtasks and change history. A key it had before a move is accepted. Its version is the value to pass as if_match when you update it.",
			readHints, "", s.getWorkItem),
		servers.Typed("create_work_item",
			"Open a new work item. Without project, your unit's project is used; without status, todo. Leave assignee out and the project's default assignee takes it, or, when the project has none, its lead gets it in triage; assigned_by in the answer tells you which happened. Send ask (optionally with decision options) to file the item as a question for its assignee.",
			writeHints, Delivers, s.createWorkItem),
		servers.Typed("update_work_item",
			"Edit a work item's title, description, status, priority, labels or parent, hand it to someone else (reason is shown to them), make one checklist edit, and add or drop dependency links. Pass if_match with the version you read so the edit is refused if someone changed the item meanwhile. The version answered is the item's latest.",
			writeHints, Delivers, s.updateWorkItem),
		servers.Typed("comment_on_work_item",
			"Add a comment to a work item. Writing @handle wakes that colleague. ask addresses a question to someone, decision lists the options, and choice with answers (the comment id of the question) records the answer. One turn leaves at most one comment on an item.",
			writeHints, Delivers, s.commentOnWorkItem),
		servers.Typed("merge_work_item",
			"Resolve a duplicate: key is closed as cancelled and linked to into, which keeps the work, and key's subtasks are re-parented under into.",
			writeHints, Delivers, s.mergeWorkItem),
		servers.Typed("move_work_item",
			"Transfer a top-level work item, subtasks included, into another project. They are given keys in the new project and their former keys go on working. Reserved to the lead of the project the item is leaving.",
			writeHints, Delivers, s.moveWorkItem),
		servers.Typed("search_work_items",
			"Look up work items by their wording; titles and descriptions are ranked against the query. mode selects hybrid (the default), keyword or semantic ranking. The answer reports the mode actually used, with a sentence in degraded whenever that differs from the one requested.",
			readHints, "", s.searchWorkItems),
		servers.Typed("list_projects",
			"List the company's projects: key, name, unit, lead, default assignee, labels and how many items each holds per status. Yours is marked.",
			readHints, "", s.listProjects),
		servers.Typed("get_project",
			"Read one project: its name, unit, lead, default assignee, declared labels and item counts per status. Defaults to your unit's project.",
			readHints, "", s.getProject),
		servers.Typed("write_project",
			"Write a project's settings as whole values: its name and default assignee (the lead's to change) and its set of labels (anybody may add one; removing is the lead's). Repeating the same write is harmless.",
			wholeHints, Delivers, s.writeProject),
		servers.Typed("get_work_catalogue",
			"Read the work catalogue: the statuses items move through (with what each means: open, started, done, cancelled) and the priorities.",
			readHints, "", s.getWorkCatalogue),
		servers.Typed("write_work_catalogue",
			"Replace the work catalogue's statuses and priorities, whole. For people (an administrator or a unit lead), not seats. A status items still carry cannot be left out.",
			wholeHints, Delivers, s.writeWorkCatalogue).ForOperators(),
		servers.Typed("list_activity",
			"The tracker's activity feed, newest first: who changed what, described in a line, optionally for one project or item.",
			readHints, "", s.listActivity),
		servers.Typed("get_activity",
			"One activity row with its full change record, including any text that was written.",
			readHints, "", s.getActivity),
		servers.Typed("list_project_files",
			"Browse the documents kept with a project, sorted by path and paged: each entry gives path, media type, size, version and who wrote it.",
			readHints, "", s.listProjectFiles),
		servers.Typed("read_project_file",
			"Fetch a project document page by page starting at a byte offset. Text is returned fenced and attributed to its writers; set base64 to receive raw bytes instead.",
			readHints, "", s.readProjectFile),
		servers.Typed("write_project_file",
			"Create a project document at a path, or overwrite it entirely; if_version guards against overwriting someone else's newer version. Sending content and type identical to what is stored writes nothing and reports outcome unchanged.",
			writeHints, Delivers, s.writeProjectFile),
		servers.Typed("remove_project_file",
			"Delete a project document, bytes and all, so nothing of it is kept. Reserved to the project's lead.",
			destroyHints, Delivers, s.removeProjectFile),
	}
}
