package knowledge

import "github.com/crewlet/hub/servers"

// Tools is the knowledge base's tool table. Reads deliver nowhere; every
// write puts something on a page in front of whoever reads it, so it
// delivers to the knowledge base (WR-9).
func Tools(d Deps) []servers.Tool {
	s := newSrv(d)
	return []servers.Tool{
		servers.Typed("list_pages",
			"Browse the knowledge base: the pages of a container (your unit's space by default), optionally only those under one parent or whose title contains some words, in title order and paged. Drafts are listed too, marked as drafts.",
			readHints, "", s.listPages),
		servers.Typed("get_page",
			"Read one page by id: its body, where it sits (breadcrumb), the pages under it, its comments, its history and which pages link to it. Its version is what save_page needs.",
			readHints, "", s.getPage),
		servers.Typed("write_page",
			"Create a page. Its title is its address and must be free in its container (your unit's space by default). A parent must be a page of the same container that is not in the trash. Link another page in the body as [its title](#/knowledge/pages/<page id>). status is published (the default) or draft; a draft is listed but no search finds it. An empty body makes a folder page that only groups the pages under it.",
			writeHints, Delivers, s.writePage),
		servers.Typed("save_page",
			"Edit a page, stating the version you read: an edit over a newer version is refused with what changed, because there is no safe merge of prose. Change its title, body, status or parent (a parent moves it; empty moves it to the container's top; never under itself). watch true follows the page, false stops following.",
			writeHints, Delivers, s.savePage),
		servers.Typed("search_knowledge",
			"Search the knowledge base for pages by what they say. mode picks the ranking: hybrid (the default) fuses keywords and meaning, keyword matches words, semantic ranks by meaning. The answer names the mode it served and says in degraded when that is not the one asked for; a semantic search that had nothing to rank by meaning says so, which tells nothing about whether a page exists. Drafts are found by no search until published.",
			readHints, "", s.searchKnowledge),
		servers.Typed("comment_on_page",
			"Add a comment to a page, or with edit replace one of your own comments. One turn leaves at most one comment on a page.",
			writeHints, Delivers, s.commentOnPage),

		// A person's, on the operator surface only (OPS-3).
		servers.Typed("list_trash",
			"List the pages in your trash, those you may take out (of a space you lead, put there by you, or any as an administrator), optionally of one container: each one's id, container, title, and who put it there and when. A page in the trash is listed nowhere else, found by no search, read by nobody and takes no edit.",
			readHints, "", s.listTrash).ForOperators(),
		servers.Typed("restore_from_trash",
			"Take a page out of the trash, back where it was. For the lead of the page's space, an administrator, or whoever put it in the trash.",
			writeHints, Delivers, s.restoreFromTrash).ForOperators(),
	}
}
