package artifacts

import "github.com/crewlet/hub/servers"

// Tools is the artifact store's tool table (ART-1): nine for artifacts and
// four for their datastores, each named for the row of the authority table
// it asks. None delivers (WR-9): publishing puts nothing in front of
// anybody; a seat posts the url every answer carries with a tool that
// does. list_dashboard_sources is in the table only where the node has the
// engine's sources to list (CAT-3).
func Tools(d Deps) []servers.Tool {
	s := newSrv(d)
	tools := []servers.Tool{
		servers.Typed("list_artifacts",
			"List the artifacts you can open (and, in a turn, that whom you act for can open): scope mine, shared, company, agents or all; optionally one kind and words in the title or description; a page at a time. Each row carries its url.",
			readHints, Delivers, s.listArtifacts),
		servers.Typed("get_artifact",
			"Read one artifact: its head, its newest versions, the files of a version and a page of one file's source (the main file by default; pass offset to read on, page by page). The answer says your role and whether you may publish (writer).",
			readHints, Delivers, s.getArtifact),
	}
	if d.Sources != nil {
		tools = append(tools, servers.Typed("list_dashboard_sources",
			"List the engine sources a dashboard's engine datasets may read: each one's parameters, columns, who may read it and how it refreshes. It holds no rows: a board reads a source as that board's viewer.",
			readHints, Delivers, s.listSources))
	}
	return append(tools,
		servers.Typed("create_artifact",
			"Make a new artifact (html, doc, slides, dashboard or sheet) from inline content and files (at most 1 MiB decoded in all), or from a project's file or directory (source). When a person asked you for it, they are made its editor. The answer carries its url; creating it tells nobody.",
			writeHints, Delivers, s.createArtifact),
		servers.Typed("publish_artifact",
			"Publish a new version on the base_version you read: exact edits (old_str occurs once, new_str replaces it), content and files (null removes a file), a build's whole source, or restore_version. A newer version published since your base is refused with what changed; read it again and publish on it. There is no force.",
			writeHints, Delivers, s.publishArtifact),
		servers.Typed("update_artifact",
			"Change an artifact's title, description or icon, or one version's label. Takes editor.",
			wholeHints, Delivers, s.updateArtifact),
		servers.Typed("share_artifact",
			"Share an artifact you own with a seat (its handle), a unit (unit:<key>) or the company (company), as viewer, contributor or editor; sharing again changes the role.",
			wholeHints, Delivers, s.shareArtifact),
		servers.Typed("unshare_artifact",
			"Withdraw a share of an artifact you own from a seat, a unit (unit:<key>) or the company.",
			destroyHints, Delivers, s.unshareArtifact),
		servers.Typed("upload_artifact_asset",
			"Add an image, data file or font to the asset store of an artifact that declares the assets capability (at most 1 MiB). The answer's ref is the path its pages use for it.",
			writeHints, Delivers, s.uploadAsset),
		servers.Typed("read_artifact_data",
			"Read an artifact's datastore: with no collection, its schema (every collection, its columns and who may read and write it); with one, a page of its rows you may read, one row by doc, or (since, an earlier answer's through) what changed after that read.",
			readHints, Delivers, s.readArtifactData),
		servers.Typed("query_artifact_data",
			"Query one collection of an artifact's datastore: the rows you may read whose indexed columns match every filter in where, ordered by order_by, a page at a time.",
			readHints, Delivers, s.queryArtifactData),
		servers.Typed("write_artifact_data",
			"Write 1 to 100 ops to an artifact's datastore, all or none (set, merge, delete, increment, append, add, remove), each decided by its collection's rules at the role you write with. if_version writes a row only if nobody changed it since; a conflict answers the rows as they are now. A turn writes at most 1,000 ops.",
			writeHints, Delivers, s.writeArtifactData),
		servers.Typed("set_artifact_schema",
			"State every collection an artifact's datastore keeps after the change, with its columns and rules; a collection left out is dropped with its rows. An agent may tighten rules and never loosen them (lower a role, lift humans_only, append_only or immutability, remove a condition, repoint assigned_to_viewer, drop a protected column or a collection): that is a person's.",
			destroyHints, Delivers, s.setArtifactSchema),
	)
}
