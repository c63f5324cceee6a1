"""Ids of the saved views and of the address bar's writer, and what the browser sends them."""

from runners.eval_viewer.shared.sends import Sends, anything, record, text, whole

SAVED_VIEWS = "saved-views"  # the run's named views (address/callbacks.py); choosing one opens it
VIEW_NAME = "view-name"  # the name to save the view under
SAVE_VIEW = "save-view"
SAVE_VIEW_ASKED = "save-view-asked"  # {name, address}: what the browser asks the server to save
VIEW_NOTE = "view-note"  # 'saved as ...', or why not
URL_STATE = "url-state"  # the address bar's writer (run, epoch, idx, tab, metric, sort) outputs to this store's id

SENDS: Sends = {(SAVE_VIEW_ASKED, "data"): record(name=anything, address=text, at=whole)}  # a name: ``SavedViews.save``
