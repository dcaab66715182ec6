# The visualizer's core, listed once for both of its targets: the native
# build (viz/CMakeLists.txt) and the browser build (viz/web/CMakeLists.txt).
#   DISTLAB_VIZ_PANEL_SOURCES    the panels, the models, the trace reader:
#                                compiled alike for both
#   DISTLAB_VIZ_NATIVE_SOURCES   headless rendering (EGL) and PNG files
set(DISTLAB_VIZ_PANEL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/app.cpp
  ${CMAKE_CURRENT_LIST_DIR}/colors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ddp_panel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ddp_scene.cpp
  ${CMAKE_CURRENT_LIST_DIR}/experts_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/experts_panel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/collectives_panel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/collective_scene.cpp
  ${CMAKE_CURRENT_LIST_DIR}/context_panel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/flight_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/flight_overlay.cpp
  ${CMAKE_CURRENT_LIST_DIR}/live_feed.cpp
  ${CMAKE_CURRENT_LIST_DIR}/memory_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/memory_panel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/options.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pipeline_panel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pipeline_plots.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pipeline_scene.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_panel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ring_scene.cpp
  ${CMAKE_CURRENT_LIST_DIR}/synthetic_trace.cpp
  ${CMAKE_CURRENT_LIST_DIR}/timeline.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace_layout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace_loader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace_panel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/url_query.cpp
  ${CMAKE_CURRENT_LIST_DIR}/wire_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/wire_panel.cpp
)
set(DISTLAB_VIZ_NATIVE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/headless.cpp
  ${CMAKE_CURRENT_LIST_DIR}/image.cpp
)
